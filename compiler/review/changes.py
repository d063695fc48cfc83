"""What `harnessc diff` reports besides the policy comparison: the registry, the surfaces,
availability and workflow steps, read from the two typed models (language.md §§3–5, 11).

Each difference is one `Change` of a kind of `CHANGE_KINDS`. Names of the root module are
paired without their module prefix (a spec renamed, or `diff old.harness new.harness` whose
stems differ, still pairs `old.main` with `new.main`); tool ids are global and pair as they are.

- Registry: a tool registered, removed, or changed in what decides its calls (kind, effects,
  risk, schema version, input and output fields, operations, wire name, trust, labels,
  `on_success`).
- Surfaces: a surface added or removed; a tool newly public on a surface or no longer public
  there (`surface_tools`, the runtime's one meaning of `expose`/`hide`).
- Availability: what a tool's availability asks of the facts (`availability_parts`: the
  runtime or connection that provides a dynamic tool, then `requires`; an MCP tool also the six
  conditions of §8), before and after, in words (`condition_text`), compared by the solver
  with facts under which the tool is available on one side only.
- Workflow steps: see `step_changes`, which needs the policy comparison.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from harnessc.runtime.judge.availability import MCP_CONDITIONS, condition_text
from harnessc.runtime.judge.policy import Decision, PolicyEngine
from harnessc.runtime.model import (
    And,
    DefaultDecision,
    EnumMember,
    Field,
    ListValue,
    Literal,
    Path,
    Policy,
    RecordValue,
    Rule,
    Schema,
    Selector,
    SourceRef,
    Spec,
    Step,
    Tool,
    Workflow,
    without_origins,
)
from harnessc.runtime.model.semantics import selects, surface_tools
from pydantic import BaseModel

from ..analysis.availability import AVAILABLE, availability_parts
from ..analysis.compare import (
    Comparison,
    Region,
    call_text,
    compare_policies,
    runtime_call,
    runtime_outcome,
)
from ..analysis.concrete import Call
from ..analysis.text import update_text

__all__ = [
    "CHANGE_KINDS",
    "Change",
    "availability_changes",
    "local_name",
    "plural",
    "registry_changes",
    "spec_changes",
    "step_changes",
    "surface_changes",
    "workflow_policy",
]

CHANGE_KINDS: dict[str, str] = {
    "tool-added": "a tool is registered that was not",
    "tool-removed": "a tool is no longer registered",
    "tool-changed": "a tool's kind, effects, risk, schema, operations or wire name changed",
    "surface-added": "a surface is declared that was not",
    "surface-removed": "a surface is no longer declared",
    "tool-exposed": "a tool is newly public on a surface",
    "tool-hidden": "a tool is no longer public on a surface",
    "availability-changed": "what a tool's availability asks of the facts changed",
    "step-changed": "a workflow's call step was added, removed, or calls another tool or "
    "with other arguments",
    "step-judgement-changed": "a workflow step's call is decided differently, shown by a "
    "concrete call",
    "step-affected": "a workflow step calls a tool whose calls are decided differently under "
    "its workflow's policy, for some arguments the step may pass",
}
"""Every kind of non-policy change, in the order reports list them, with its meaning."""


@dataclass(frozen=True)
class Change:
    """One difference between the two specs that is not a region of the policy comparison."""

    kind: str
    subject: str
    """What changed: a tool id, `surface: tool`, `workflow.step`."""
    summary: str
    """One line in words."""
    details: tuple[str, ...] = ()
    """Before and after, one line each."""
    origin: SourceRef | None = None
    """Where it is declared in the new spec (the old one's place when it was removed)."""
    tool: str | None = None
    """The tool it concerns, for reports grouped by tool."""
    widens: bool = False
    """A call that was denied or asked is now allowed (only a step's judgement can say)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "tool": self.tool,
            "summary": self.summary,
            "details": list(self.details),
            "location": _location(self.origin),
            "widens": self.widens,
        }


def _location(origin: SourceRef | None) -> dict[str, Any] | None:
    if origin is None:
        return None
    return {"file": origin.file, "line": origin.line, "column": origin.column}


def local_name(spec: Spec, key: str) -> str:
    """A module-scoped name as it pairs across the two specs: without the root module's prefix
    (`remediation.main` → `main`), other modules' names (`std.risk.defaults`) as they are."""
    prefix = spec.root_module + "."
    return key[len(prefix) :] if key.startswith(prefix) else key


def _by_local(spec: Spec, items: Mapping[str, Any]) -> dict[str, Any]:
    return {local_name(spec, key): value for key, value in items.items()}


def spec_changes(old: Spec, new: Spec) -> list[Change]:
    """The registry, surface and availability changes from `old` to `new`, in report order."""
    return [
        *registry_changes(old, new),
        *surface_changes(old, new),
        *availability_changes(old, new),
    ]


# ---------------------------------------------------------------------------------------------
# Registry


def plural(count: int, word: str) -> str:
    """`1 region`, `2 regions`."""
    return f"{count} {word}{'s' if count != 1 else ''}"


def _words(values: Iterable[str]) -> str:
    items = list(values)
    return ", ".join(items) if items else "none"


def _type_text(fld: Field) -> str:
    """A field's type and constraints as JSON Schema says them (one canonical spelling)."""
    schema = fld.to_json_schema()
    text = json.dumps(schema, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    return text + ("" if fld.required else " (optional)")


def _shape_text(schema: Schema | None) -> str:
    """What a schema is as a whole: a record (open or not), or the type an `output` is written
    as (`output list<…>`), as JSON Schema says it."""
    if schema is None:
        return "none"
    if schema.shape is not None:
        shape = schema.shape.to_json_schema()
        return json.dumps(shape, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    return "an open record (`...`)" if schema.open else "a record"


def _schema_lines(what: str, old: Schema | None, new: Schema | None) -> list[str]:
    before = {f.name: f for f in (old.fields if old else ())}
    after = {f.name: f for f in (new.fields if new else ())}
    lines = []
    if old is not None and new is not None and _shape_text(old) != _shape_text(new):
        lines.append(f"{what}: {_shape_text(old)} → {_shape_text(new)}")
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        if was is None and now is not None:
            lines.append(f"{what} field `{name}` added: {_type_text(now)}")
        elif now is None and was is not None:
            lines.append(f"{what} field `{name}` removed (was {_type_text(was)})")
        elif was is not None and now is not None and _type_text(was) != _type_text(now):
            lines.append(f"{what} field `{name}`: {_type_text(was)} → {_type_text(now)}")
    return lines


_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("kind", "kind"),
    ("effects", "effects"),
    ("risk", "risk"),
    ("version", "schema version"),
    ("wire_name", "wire name"),
    ("trust", "trust"),
    ("labels", "data labels"),
    ("replaced_by", "replaced by"),
    ("provided_by", "provided by"),
    ("mcp_server", "MCP server"),
    ("skill", "skill"),
)


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return _words(str(v) for v in value)
    return str(value)


def tool_differences(old: Tool, new: Tool) -> list[str]:
    """What changed in a tool that decides its calls, one line each (descriptions are left out:
    they steer ranking, never a decision)."""
    lines = [
        f"{word}: {_shown(getattr(old, name))} → {_shown(getattr(new, name))}"
        for name, word in _ATTRIBUTES
        if getattr(old, name) != getattr(new, name)
    ]
    was_updates, now_updates = _updates(old), _updates(new)
    if was_updates != now_updates:
        # a value a call adds to a fact is a trusted source for later calls, until removed
        lines.append(f"on_success: {_shown(was_updates or None)} → {_shown(now_updates or None)}")
    lines += _schema_lines("input", old.input, new.input)
    lines += _schema_lines("output", old.output, new.output)
    for name in sorted(old.operations.keys() | new.operations.keys()):
        was, now = old.operations.get(name), new.operations.get(name)
        if was is None and now is not None:
            lines.append(
                f"operation `{name}` added: effects {_words(now.effects)}, risk {now.risk}"
            )
        elif now is None and was is not None:
            lines.append(f"operation `{name}` removed")
        elif was is not None and now is not None:
            if was.effects != now.effects:
                lines.append(
                    f"operation `{name}` effects: {_words(was.effects)} → {_words(now.effects)}"
                )
            if was.risk != now.risk:
                lines.append(f"operation `{name}` risk: {was.risk} → {now.risk}")
            lines += _schema_lines(f"operation `{name}` input", was.input, now.input)
    return lines


def _updates(tool: Tool) -> tuple[str, ...]:
    """The tool's `on_success` updates, as written."""
    return tuple(update_text(u) for u in tool.on_success)


def _tool_summary(tool: Tool) -> str:
    return f"{tool.kind} tool, effects {_words(tool.effects)}, risk {tool.risk}"


def registry_changes(old: Spec, new: Spec) -> list[Change]:
    changes = []
    for tool_id in sorted(old.tools.keys() | new.tools.keys()):
        was, now = old.tools.get(tool_id), new.tools.get(tool_id)
        if was is None and now is not None:
            changes.append(
                Change(
                    "tool-added",
                    tool_id,
                    f"`{tool_id}` is registered: {_tool_summary(now)}",
                    (*_availability_words(new, now),),
                    now.origin,
                    tool_id,
                )
            )
        elif now is None and was is not None:
            changes.append(
                Change(
                    "tool-removed",
                    tool_id,
                    f"`{tool_id}` is no longer registered (was a {_tool_summary(was)})",
                    (),
                    was.origin,
                    tool_id,
                )
            )
        elif was is not None and now is not None:
            lines = tool_differences(was, now)
            if lines:
                changes.append(
                    Change(
                        "tool-changed",
                        tool_id,
                        f"`{tool_id}` changed: {plural(len(lines), 'difference')}",
                        tuple(lines),
                        now.origin,
                        tool_id,
                    )
                )
    return changes


# ---------------------------------------------------------------------------------------------
# Surfaces


def surface_changes(old: Spec, new: Spec) -> list[Change]:
    before, after = _by_local(old, old.surfaces), _by_local(new, new.surfaces)
    changes = []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        old_tools = set(surface_tools(old, was)) if was is not None else set()
        new_tools = set(surface_tools(new, now)) if now is not None else set()
        if was is None or now is None:
            # declared on one side only: the whole surface, with the tools public on it
            added = now is not None
            surface = now if now is not None else was
            assert surface is not None
            tools = sorted(new_tools if added else old_tools)
            summary = (
                f"surface `{surface.name}` is declared, with "
                if added
                else f"surface `{surface.name}` is no longer declared; it had "
            )
            changes.append(
                Change(
                    "surface-added" if added else "surface-removed",
                    surface.name,
                    summary + plural(len(tools), "public tool"),
                    tuple(f"{'public' if added else 'was public'}: `{t}`" for t in tools),
                    surface.origin,
                )
            )
            continue
        moved = [(t, "tool-exposed") for t in new_tools - old_tools]
        moved += [(t, "tool-hidden") for t in old_tools - new_tools]
        for tool_id, kind in sorted(moved, key=lambda m: (m[1] == "tool-hidden", m[0])):
            exposed = kind == "tool-exposed"
            if exposed:
                reason = (
                    "newly registered"
                    if tool_id not in old.tools
                    else "selected by `expose` and no longer by `hide`, or now of a public kind"
                )
            else:
                reason = (
                    "no longer registered"
                    if tool_id not in new.tools
                    else "no longer selected by `expose`, or hidden, or no longer of a public kind"
                )
            where = "newly public" if exposed else "no longer public"
            changes.append(
                Change(
                    kind,
                    f"{now.name}: {tool_id}",
                    f"`{tool_id}` is {where} on surface `{now.name}`",
                    (reason,),
                    now.origin,
                    tool_id,
                )
            )
    return changes


# ---------------------------------------------------------------------------------------------
# Availability


def _availability_words(spec: Spec, tool: Tool) -> list[str]:
    """What the tool's availability asks, one condition a line."""
    parts = [f"requires `{condition_text(part)}`" for part in availability_parts(spec, tool)]
    if tool.kind == "mcp":
        parts += [f"requires (MCP) {condition}" for condition in MCP_CONDITIONS]
    return parts or ["always available (asks nothing of the facts)"]


def _availability_key(spec: Spec, tool: Tool) -> object:
    return (tool.kind == "mcp", [without_origins(part) for part in availability_parts(spec, tool)])


def _available_policy(spec: Spec, tool: Tool) -> Policy:
    """A policy that allows the tool's calls exactly when it is available (the analysis's
    reading of availability, compiler/analysis/availability.py): compared like any policy."""
    name = f"{AVAILABLE}{tool.id}"
    parts = availability_parts(spec, tool)
    condition = (parts[0] if len(parts) == 1 else And(items=tuple(parts))) if parts else None
    allow = Rule(
        label=name,
        policy=name,
        effect="allow",
        selectors=(Selector(kind="id", value=tool.id, text=tool.id),),
        condition=condition,
    )
    return Policy(name=name, default=DefaultDecision(effect="deny"), rules=(allow,))


def _facts_text(call: Call) -> str:
    """The facts of a witness, as a reader sets them (its arguments do not matter here)."""
    parts = [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(call.facts.items())]
    parts += [f"connected({k})" for k, v in sorted(call.connections.items()) if v]
    parts += [f"running({k})" for k, v in sorted(call.runtimes.items()) if v]
    return ", ".join(parts) or "no fact supplied, nothing connected or running"


def availability_changes(old: Spec, new: Spec) -> list[Change]:
    """Tools whose availability asks something else of the facts. The two conditions are
    compared by the solver (as policies that allow a call exactly when its tool is
    available), so a condition written another way with the same meaning is no change, and
    each difference comes with facts under which the tool is available on one side only."""
    changes = []
    for tool_id in sorted(old.tools.keys() & new.tools.keys()):
        was, now = old.tools[tool_id], new.tools[tool_id]
        if _availability_key(old, was) == _availability_key(new, now):
            continue
        # verify=False: the runtime has no such policy to decide the witness by
        compared = compare_policies(
            old,
            _available_policy(old, was),
            new,
            _available_policy(new, now),
            [tool_id],
            verify=False,
        )
        flips = sorted({(r.old.effect, _facts_text(r.witness)) for r in compared.regions})
        if not flips and not compared.undecided and (was.kind == "mcp") == (now.kind == "mcp"):
            continue  # written another way, the same meaning
        before, after = _availability_words(old, was), _availability_words(new, now)
        lines = [f"before: {line}" for line in before if line not in after]
        lines += [f"after: {line}" for line in after if line not in before]
        if not lines:  # the same words from different conditions: show both whole
            lines = [*(f"before: {line}" for line in before), *(f"after: {line}" for line in after)]
        for was_available, facts in flips:
            where = "no longer available" if was_available == "allow" else "newly available"
            lines.append(f"{where}, e.g. with {facts}")
        if compared.undecided:
            lines.append("the solver did not settle whether other facts change it")
        changes.append(
            Change(
                "availability-changed",
                tool_id,
                f"`{tool_id}` is available under other conditions",
                tuple(lines),
                now.origin,
                tool_id,
            )
        )
    return changes


# ---------------------------------------------------------------------------------------------
# Workflows


def workflow_policy(spec: Spec, workflow: Workflow) -> str | None:
    """The qualified policy a workflow's calls are judged under: its `policy`, else its agent's
    (language.md §11); None when it names neither."""
    if workflow.policy is not None:
        policy = spec.policy(workflow.policy)
        return policy.name if policy else None
    if workflow.agent is None:
        return None
    agent = spec.agents.get(workflow.agent) or spec.agents.get(spec.qualified(workflow.agent))
    if agent is None or agent.policy is None:
        return None
    policy = spec.policy(agent.policy)
    return policy.name if policy else None


_CONSTANT = (Literal, EnumMember, ListValue, RecordValue)


def _constant(value: object) -> tuple[bool, Any]:
    """A step argument's JSON value when the spec writes it out (`"staging"`, `[1, 2]`);
    `(False, None)` when it reads the workflow's input or an earlier step."""
    if isinstance(value, Literal):
        return True, value.value
    if isinstance(value, EnumMember):
        return True, value.name
    if isinstance(value, ListValue):
        items = [_constant(i) for i in value.items]
        return all(k for k, _ in items), [v for _, v in items]
    if isinstance(value, RecordValue):
        fields = {k: _constant(v) for k, v in value.fields.items()}
        return all(k for k, _ in fields.values()), {k: v for k, (_, v) in fields.items()}
    return False, None


def _decided(engine: PolicyEngine, policy: str | None, call: Call) -> Any:
    """The runtime's decision of `call` under `policy` (a refusal when no policy judges)."""
    if policy is None:
        reason = "the workflow names no agent or policy"
        return Decision.denied(reason, policy="", tool_id=call.tool)
    return engine.decide(policy, runtime_call(engine.spec, call))


def _decision_text(decision: Any) -> str:
    by = f"`{decision.rule}`" if decision.rule else "the default"
    where = f" ({decision.origin.file}:{decision.origin.line})" if decision.origin else ""
    return f"{decision.effect}, by {by}{where}"


def _step_call(step: Step, witness: Call) -> tuple[Call, list[str]]:
    """The witness with the step's written arguments in place of its own; the names of the
    arguments the step reads from the input or an earlier step (the witness keeps its
    values for those)."""
    args = dict(witness.args)
    unknown = []
    for name, value in sorted(step.args.items()):
        known, found = _constant(value)
        if known:
            args[name] = found
        else:
            unknown.append(name)
    return replace(witness, args=args), unknown


def _args_read(node: object, out: set[str]) -> bool:
    """Add to `out` the arguments a condition reads (`args.x` → `x`); False when it reads the
    arguments as a whole (`args`), so that any argument may decide it."""
    if isinstance(node, Path):
        if node.root == "args":
            if not node.parts:
                return False
            out.add(node.parts[0])
        return True
    if isinstance(node, BaseModel):
        return all(_args_read(getattr(node, name), out) for name in type(node).model_fields)
    if isinstance(node, dict):
        return all(_args_read(v, out) for v in node.values())
    if isinstance(node, list | tuple):
        return all(_args_read(v, out) for v in node)
    return True


def _deciding_args(spec: Spec, policy: str | None, tool_id: str | None) -> set[str] | None:
    """The arguments of a call of `tool_id` that the policy's rules can read (the operation
    `op` always: it sets the call's risk and effects); None: any argument may decide."""
    found = {"op"}
    judged = spec.policy(policy) if policy is not None else None
    tool = spec.tools.get(tool_id or "")
    if judged is None or tool is None:
        return found
    for rule in judged.rules:
        # the risk and effects sugar depends on the call's operation: such a rule may select it
        selected = any(s.kind in ("risk", "effects") or selects(s, tool) for s in rule.selectors)
        if selected and not _args_read(rule.condition, found):
            return None
    return found


def step_changes(old: Spec, new: Spec, comparison: Comparison) -> list[Change]:
    """The call steps of workflows whose judgement changes.

    A `call` step is judged under its workflow's policy (`workflow_policy`). For each region
    of the comparison of that tool under those policies, the step's call is the region's
    witness with the step's written arguments: decided by the runtime under both specs, a
    call whose decision differs makes the step `step-judgement-changed`, with that call. An
    argument read from the input or an earlier step counts as written when no rule that can
    select the tool reads it (its value cannot change the decision). A step whose tool has
    regions but whose judgement is not settled so — a rule reads an argument it does not
    write, or no witness flips with its arguments — is `step-affected`. A step added, removed,
    or calling another tool or with other arguments is `step-changed`.
    """
    before, after = _by_local(old, old.workflows), _by_local(new, new.workflows)
    engines = (PolicyEngine(old), PolicyEngine(new)) if before or after else None
    changes: list[Change] = []
    for name in sorted(before.keys() | after.keys()):
        wf_old, wf_new = before.get(name), after.get(name)
        policy_old = workflow_policy(old, wf_old) if wf_old is not None else None
        policy_new = workflow_policy(new, wf_new) if wf_new is not None else None
        steps_old = {s.name: s for s in (wf_old.steps if wf_old else ()) if s.kind == "call"}
        steps_new = {s.name: s for s in (wf_new.steps if wf_new else ()) if s.kind == "call"}
        for step_name in sorted(steps_old.keys() | steps_new.keys()):
            was, now = steps_old.get(step_name), steps_new.get(step_name)
            step = now or was
            assert step is not None
            subject = f"{name}.{step_name}"
            written = _step_difference(was, now)
            if written:
                changes.append(
                    Change(
                        "step-changed",
                        subject,
                        written[0],
                        tuple(written[1:]),
                        step.origin,
                        step.tool,
                    )
                )
            if was is None or now is None:
                continue
            regions = [
                r
                for r in comparison.regions
                if r.tool in (was.tool, now.tool)
                and r.old_policy == policy_old
                and r.new_policy == policy_new
            ]
            if not regions:
                continue
            assert engines is not None
            judged = _judge_step(subject, engines, (policy_old, policy_new), was, now, regions)
            _, unknown = _step_call(now, regions[0].witness)
            # an argument no rule reads cannot change the decision: only the others are unknown
            reads = [
                _deciding_args(old, policy_old, was.tool),
                _deciding_args(new, policy_new, now.tool),
            ]
            if all(r is not None for r in reads):
                unknown = [u for u in unknown if any(u in r for r in reads if r is not None)]
            if judged is not None and not unknown:
                changes.append(judged)
                continue
            if unknown:
                why = (
                    f"{plural(len(unknown), 'argument')} "
                    f"({', '.join(f'`{u}`' for u in unknown)}) from the workflow's input or an "
                    "earlier step"
                    + (
                        ": the call below is one the step makes when they take its values"
                        if judged is not None
                        else ""
                    )
                )
            else:
                why = (
                    "no witness flips with its written arguments; another actor or other facts may"
                )
            flipped = judged.details if judged is not None else ()
            changes.append(
                Change(
                    "step-affected",
                    subject,
                    f"step `{subject}` calls `{now.tool}`, which has "
                    f"{plural(len(regions), 'region')} of calls decided differently under its "
                    "workflow's policy",
                    (why, *sorted({f"{r.change} [{r.subject}]" for r in regions}), *flipped),
                    now.origin,
                    now.tool,
                    widens=judged is not None and judged.widens,
                )
            )
    return changes


def _step_difference(was: Step | None, now: Step | None) -> list[str]:
    """A step added, removed or rewritten, in words (first line the summary); [] if the same."""
    if was is None and now is not None:
        return [f"call step `{now.name}` is added: it calls `{now.tool}`"]
    if now is None and was is not None:
        return [f"call step `{was.name}` is removed: it called `{was.tool}`"]
    assert was is not None and now is not None
    lines = []
    if was.tool != now.tool:
        lines.append(f"tool: `{was.tool}` → `{now.tool}`")
    for arg in sorted(was.args.keys() | now.args.keys()):
        a, b = was.args.get(arg), now.args.get(arg)
        if without_origins(a) != without_origins(b):
            old_text = condition_text(a) if a is not None else "not passed"
            new_text = condition_text(b) if b is not None else "not passed"
            lines.append(f"argument `{arg}`: {old_text} → {new_text}")
    if not lines:
        return []
    return [f"call step `{now.name}` is rewritten", *lines]


def _judge_step(
    subject: str,
    engines: tuple[PolicyEngine, PolicyEngine],
    policies: tuple[str | None, str | None],
    was: Step,
    now: Step,
    regions: list[Region],
) -> Change | None:
    """The first region whose witness, with the step's arguments, the runtime decides
    differently under the two specs: the step's judgement changes (None: none does)."""
    for region in sorted(regions, key=lambda r: (not r.widened, r.change, call_text(r.witness))):
        call_old, _ = _step_call(was, region.witness)
        call_new, _ = _step_call(now, region.witness)
        call_old.tool, call_new.tool = was.tool or "", now.tool or ""
        if call_old.tool not in engines[0].spec.tools or call_new.tool not in engines[1].spec.tools:
            continue
        a = _decided(engines[0], policies[0], call_old)
        b = _decided(engines[1], policies[1], call_new)
        if runtime_outcome(a) == runtime_outcome(b):
            continue
        widens = a.effect in ("deny", "ask") and b.effect == "allow"
        return Change(
            "step-judgement-changed",
            subject,
            f"step `{subject}` calls `{now.tool}`: decided {a.effect} before and {b.effect} "
            f"after{' (widened)' if widens else ''}",
            (
                f"old: {_decision_text(a)}",
                f"new: {_decision_text(b)}",
                f"e.g. `{call_text(call_new)}`",
            ),
            now.origin,
            now.tool,
            widens=widens,
        )
    return None
