"""Workflow paths: every path through each workflow, walked with stub outputs."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from harnessc.runtime.judge.normalize import Validator
from harnessc.runtime.judge.policy import CallContext, PolicyEngine
from harnessc.runtime.model import (
    And,
    Compare,
    Condition,
    EnumMember,
    FactCall,
    Field,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    RecordValue,
    Schema,
    Spec,
    Step,
    Workflow,
)
from harnessc.runtime.model.semantics import OPERATORS, ordering_kind

from ...analysis.examples import NoExampleError
from ...analysis.policy import PolicyAnalysis
from .context import MAX_PATHS, RESOURCE, CaseContext
from .facts import failed_conditions, tool_facts
from .values import example_value, schema_errors

__all__ = ["plan_workflows"]

# ---------------------------------------------------------------------------------------------
# Workflow paths

WORKFLOW_ACTOR = {"user": "u-workflow", "role": "member", "tenant": "tenant-1"}


def _read(values: Mapping[str, Any], key: str, parts: Sequence[str]) -> Any:
    value: Any = values.get(key)
    for part in parts:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _value(node: object, inputs: Mapping[str, Any], steps: Mapping[str, Any]) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, EnumMember):
        return node.name
    if isinstance(node, Path):
        if node.root == "input":
            return _read({"input": inputs}, "input", node.parts)
        if node.root == "step" and node.parts:
            return _read(steps, node.parts[0], node.parts[1:])
        return None
    if isinstance(node, ListValue):
        return [_value(i, inputs, steps) for i in node.items]
    if isinstance(node, RecordValue):
        return {k: _value(v, inputs, steps) for k, v in sorted(node.fields.items())}
    return None


_PLANNED = frozenset({"equality", "order", "member"})
"""The operator families a path's `when` is planned with (others: its paths are skipped)."""


def _holds(cond: Condition, inputs: Mapping[str, Any], steps: Mapping[str, Any]) -> bool:
    """A step's `when` (it reads only `input` and step values) over the path's values, each
    operator meaning what it means when the runtime evaluates the `when`
    (runtime/model/semantics.py); the compiler plans with equalities, orderings and `in` only."""
    if isinstance(cond, And):
        return all(_holds(i, inputs, steps) for i in cond.items)
    if isinstance(cond, Or):
        return any(_holds(i, inputs, steps) for i in cond.items)
    if isinstance(cond, Not):
        return not _holds(cond.item, inputs, steps)
    if isinstance(cond, Compare):
        operator = OPERATORS[cond.op]
        if operator.family not in _PLANNED:
            raise NoExampleError(f"the compiler cannot evaluate `{cond.op}` in a step's `when`")
        left, right = _value(cond.left, inputs, steps), _value(cond.right, inputs, steps)
        return operator.evaluate(left, right, ordering_kind(cond.left, cond.right))
    if isinstance(cond, FactCall):
        raise NoExampleError("a step's `when` reads a fact")
    return _value(cond, inputs, steps) is True


def _reads_step(cond: object, name: str) -> bool:
    if isinstance(cond, Path):
        return cond.root == "step" and cond.parts[:1] == (name,)
    if isinstance(cond, Compare):
        return _reads_step(cond.left, name) or _reads_step(cond.right, name)
    if isinstance(cond, And | Or):
        return any(_reads_step(i, name) for i in cond.items)
    if isinstance(cond, Not):
        return _reads_step(cond.item, name)
    if isinstance(cond, ListValue):
        return any(_reads_step(i, name) for i in cond.items)
    return False


def _order(workflow: Workflow) -> list[Step]:
    """The main-path steps in an order that respects every dependency (text order first)."""
    main = [s for s in workflow.steps if not s.compensation]
    names = {s.name for s in main}
    done: set[str] = set()
    out: list[Step] = []
    while len(out) < len(main):
        ready = next(
            s
            for s in main
            if s.name not in done and all(d in done or d not in names for d in s.depends_on)
        )
        out.append(ready)
        done.add(ready.name)
    return out


def _demands(spec: Spec, workflow: Workflow) -> dict[tuple[str, ...], Field]:
    """What the arguments of call steps require of the values they read: `("input", field)`
    or `(step, field, …)` → the argument's field (its pattern, enum, bounds)."""
    found: dict[tuple[str, ...], Field] = {}
    for step in workflow.steps:
        tool = spec.tools.get(step.tool or "") if step.kind == "call" else None
        if tool is None:
            continue
        for arg, node in sorted(step.args.items()):
            f = tool.input.field(arg)
            if f is None:
                continue
            if isinstance(node, Path) and node.root in ("input", "step") and node.parts:
                key = ("input", *node.parts) if node.root == "input" else tuple(node.parts)
                found.setdefault(key, f)
            elif isinstance(node, ListValue) and f.type.item is not None:
                for item in node.items:
                    if isinstance(item, Path) and item.root in ("input", "step") and item.parts:
                        key = ("input", *item.parts) if item.root == "input" else tuple(item.parts)
                        found.setdefault(key, Field(name=arg, type=f.type.item))
    return found


def _stub(
    schema: Schema | None, prefix: tuple[str, ...], demands: Mapping[tuple[str, ...], Field]
) -> dict[str, Any]:
    """A value valid for `schema` whose fields also meet what the steps reading them demand."""
    if schema is None:
        return {}
    if schema.shape is not None:
        # an output written as a type (`output list<{ … }>`): its smallest value
        return example_value(None, schema.shape)  # type: ignore[no-any-return]
    out = {f.name: example_value(f, f.type) for f in schema.fields if not f.type.optional}
    for f in schema.fields:
        wanted = demands.get((*prefix, f.name))
        if wanted is None:
            continue
        try:
            value = example_value(wanted, wanted.type)
        except NoExampleError:
            continue
        trial = {**out, f.name: value}
        if not schema_errors(schema, trial):
            out = trial
    # a text names its step and field where both schemas allow it (`scan-report`): provenance
    # reads where a value appeared, so one stub must not quote another step's value by accident
    for name, value in list(out.items()):
        if not isinstance(value, str):
            continue
        named = "-".join((*prefix, name))
        trial = {**out, name: named}
        wanted = demands.get((*prefix, name))
        if schema_errors(schema, trial) or (
            wanted is not None and schema_errors(Schema(fields=(wanted,)), {wanted.name: named})
        ):
            continue
        out = trial
    return out


class _Walk:
    """Every path through one workflow: each option of a `decide` and of a `gate` (the
    condition holds, or the gate times out) is its own path."""

    def __init__(self, spec: Spec, workflow: Workflow) -> None:
        self.spec = spec
        self.workflow = workflow
        self.order = _order(workflow)
        self.by_name = {s.name: s for s in workflow.steps}
        self.demands = _demands(spec, workflow)
        self.inputs = _stub(workflow.input, ("input",), self.demands)
        self.outputs: dict[str, dict[str, Any]] = {}
        for step in workflow.steps:
            if step.kind == "call":
                tool = spec.tools.get(step.tool or "")
                self.outputs[step.name] = _stub(
                    tool.output if tool else None, (step.name,), self.demands
                )
            elif step.kind == "delegate":
                self.outputs[step.name] = _stub(step.output, (step.name,), self.demands)
        self.paths: list[dict[str, Any]] = []
        self.truncated = False

    def run(self) -> list[dict[str, Any]]:
        self.walk(0, {}, set(), [], [])
        return self.paths

    def call_step(self, step: Step, values: Mapping[str, Any]) -> dict[str, Any]:
        args = {k: _value(v, self.inputs, values) for k, v in sorted(step.args.items())}
        return {
            "step": step.name,
            "kind": "call",
            "tool": step.tool,
            "args": {k: v for k, v in args.items() if v is not None},
            "output": self.outputs.get(step.name, {}),
        }

    def finish(self, trace: list[dict[str, Any]], choices: list[str], outcome: str) -> None:
        if len(self.paths) >= MAX_PATHS:
            self.truncated = True
            return
        self.paths.append(
            {"choices": list(choices), "steps": copy.deepcopy(trace), "outcome": outcome}
        )

    def walk(
        self,
        at: int,
        values: dict[str, Any],
        skipped: set[str],
        trace: list[dict[str, Any]],
        choices: list[str],
    ) -> None:
        if at == len(self.order):
            self.finish(trace, choices, "completed")
            return
        step = self.order[at]
        skipped_dep = next((d for d in step.depends_on if d in skipped), None)
        if skipped_dep is not None or (
            step.when is not None and not _holds(step.when, self.inputs, values)
        ):
            why = f"after skipped `{skipped_dep}`" if skipped_dep else "its `when` is false"
            entry: dict[str, Any] = {"step": step.name, "kind": "skipped", "why": why}
            self.walk(at + 1, values, skipped | {step.name}, [*trace, entry], choices)
            return
        if step.kind == "call":
            entry = self.call_step(step, values)
            self.walk(
                at + 1, {**values, step.name: entry["output"]}, skipped, [*trace, entry], choices
            )
        elif step.kind == "delegate":
            entry = {
                "step": step.name,
                "kind": "delegate",
                "agent": step.agent,
                "goal": step.goal or "",
                "output": self.outputs.get(step.name, {}),
            }
            self.walk(
                at + 1, {**values, step.name: entry["output"]}, skipped, [*trace, entry], choices
            )
        elif step.kind == "decide":
            for option in step.options:
                entry = {"step": step.name, "kind": "decide", "option": option}
                now = {**values, step.name: option}
                readers = [
                    s
                    for s in self.order[at + 1 :]
                    if s.when is not None and _reads_step(s.when, step.name)
                ]
                choice = [*choices, f"{step.name}={option}"]
                if readers and not any(_holds(s.when, self.inputs, now) for s in readers):  # type: ignore[arg-type]
                    self.finish(
                        [*trace, entry], choice, f"ended: `{step.name}` answered `{option}`"
                    )
                else:
                    self.walk(at + 1, now, skipped, [*trace, entry], choice)
        else:
            holds = {"step": step.name, "kind": "gate", "outcome": "holds"}
            self.walk(at + 1, values, skipped, [*trace, holds], [*choices, f"{step.name}=holds"])
            timeout = [*trace, {"step": step.name, "kind": "gate", "outcome": "timed out"}]
            for action in step.on_failure:
                if action.kind == "retry":
                    timeout.append({"step": step.name, "kind": "retry", "count": action.count or 0})
                elif action.kind == "compensate" and action.step in self.by_name:
                    comp = self.by_name[action.step]  # type: ignore[index]
                    if comp.kind == "call":
                        timeout.append(self.call_step(comp, values))
                else:
                    timeout.append({"step": step.name, "kind": "escalate", "answer": "abort"})
            self.finish(
                timeout, [*choices, f"{step.name}=timeout"], f"failed: gate `{step.name}` timed out"
            )


def _context(spec: Spec, entry: Mapping[str, Any], values: Mapping[str, Any]) -> CallContext | None:
    tool = spec.tools.get(entry["tool"])
    if tool is None:
        return None
    normalized, errors = Validator(tool.input).run(dict(entry["args"]))
    if errors:
        return None
    return CallContext(
        entry["tool"],
        normalized,
        WORKFLOW_ACTOR,
        RESOURCE,
        {"id": "task-workflow"},
        {},
        values,
        frozenset(spec.connections),
        frozenset(spec.runtimes),
        "call-0",
        {},
    )


def _denials(
    spec: Spec,
    engine: PolicyEngine,
    policy: str,
    calls: Sequence[Mapping[str, Any]],
    values: Mapping[str, Any],
) -> int:
    """How many of the calls the policy denies (or normalize refuses) under these facts."""
    count = 0
    for entry in calls:
        ctx = _context(spec, entry, values)
        if ctx is None or engine.decide(policy, ctx).effect == "deny":
            count += 1
    return count


def plan_workflows(
    cx: CaseContext, facts: Mapping[str, Any], solved: PolicyAnalysis | None = None
) -> list[dict[str, Any]]:
    """Every path of every workflow, under facts that make the tools its steps call available
    where they can be (a call to an unavailable one is refused `unavailable` and stops the
    path, as the harness would)."""
    spec = cx.spec
    engine = PolicyEngine(spec)
    cases = []
    for name in sorted(spec.workflows):
        workflow = spec.workflows[name]
        agent = spec.agents.get(workflow.agent or "") or spec.agents.get(
            spec.qualified(workflow.agent or "")
        )
        base: dict[str, Any] = {"workflow": name}
        if agent is None or agent.policy is None:
            cases.append(
                {
                    **base,
                    "id": name,
                    "skip": "the workflow names no agent with a policy: no session runs its calls",
                }
            )
            continue
        try:
            walk = _Walk(spec, workflow)
            paths = walk.run()
        except NoExampleError as error:
            cases.append({**base, "id": name, "skip": f"its paths cannot be planned: {error}"})
            continue
        calls = [e for p in paths for e in p["steps"] if e["kind"] == "call"]
        values = dict(facts["values"])
        for tool_id in sorted({e["tool"] for e in calls if e["tool"] in spec.tools}):
            needed = tool_facts(spec, spec.tools[tool_id], solved, facts["mcp"])
            for key, value in sorted((needed or {}).get("values", {}).items()):
                values.setdefault(key, value)

        # a fact no `requires` fixes takes the value under which fewest calls are denied
        for fact in sorted(spec.facts):
            if fact in values or spec.facts[fact].type.name != "bool":
                continue
            tried: list[tuple[int, bool | None]] = []
            for value in (False, True, None):
                candidate = {**values, fact: value} if value is not None else values
                tried.append((_denials(spec, engine, agent.policy, calls, candidate), value))
            best = min(tried, key=lambda t: t[0])[1]  # INVARIANT: ties keep the first value
            if best is not None:
                values[fact] = best
        path_facts = {**facts, "values": values}
        for index, path in enumerate(paths, 1):
            steps = []
            for entry in path["steps"]:
                if entry["kind"] == "call":
                    ctx = _context(spec, entry, values)
                    if entry["tool"] not in cx.surface(agent.surface):
                        entry["expect"] = "refused (not-on-surface)"
                    elif failed_conditions(
                        spec, spec.tools[entry["tool"]], {**path_facts, "values": values}
                    ):
                        entry["expect"] = "refused (unavailable)"
                    elif ctx is None:
                        entry["expect"] = "refused (invalid-args)"
                    else:
                        entry["expect"] = engine.decide(agent.policy, ctx).effect
                steps.append(entry)
                if entry.get("expect", "allow") not in ("allow", "ask"):
                    path["outcome"] = f"stopped: `{entry['step']}` is {entry['expect']}"
                    break
            cases.append(
                {
                    **base,
                    "id": f"{name}::{index}:" + ",".join(path["choices"]),
                    "agent": agent.name,
                    "actor": WORKFLOW_ACTOR,
                    "resource": RESOURCE,
                    "task": {"id": f"task-{name}-{index}"},
                    "facts": path_facts,
                    "input": walk.inputs,
                    "choices": path["choices"],
                    "steps": steps,
                    "outcome": path["outcome"],
                    "skip": None,
                }
            )
        if walk.truncated:
            cases.append(
                {
                    **base,
                    "id": f"{name}::more",
                    "skip": f"only the first {MAX_PATHS} paths are tested",
                }
            )
    return cases
