"""The generated test suite's cases: every decision about what to test, made from the spec alone.

`plan_cases(spec, analysis, findings)` returns plain JSON data that the generated test modules
(templates `tests_*.py.j2`) read through one generic runner. Spec text (ids, summaries, reasons,
regexes) therefore only ever reaches the generated tests as JSON strings, never as code.

What is planned, section by section:

- `witnesses`: per policy and rule, a witness call and the decision it must get, made with the
  call's tool available (`availability_analysis`: the analysis again, over available tools
  only, so z3 solves `requires` together with the rule); a rule that wins only while its tool
  is unavailable keeps its first witness, decided by the policy alone, and a session must
  refuse that call `unavailable`; rules without a witness are listed with the reason the lints
  give (skipped);
- `spec_tests`: the spec's `test` blocks, in the same shape, judged by the policy alone as
  `harnessc test` judges them (language.md §13);
- `schemas`: per tool, a minimal valid input (required fields, enums, patterns) and an invalid
  one (a required field missing, or an unknown field) with the refusal it must get, normalized
  under facts that make the tool available;
- `surfaces`, `mcp`, `delegation`: exposure, the six MCP conditions (each false: unavailable,
  not exposed, refused `unavailable` at normalize), one-level delegation;
- `availability`: per tool with a provider or `requires`, and per item of them, facts under
  which only that item is false: the call is refused `unavailable` naming it, and an
  authorised call stops before it runs once the item breaks;
- `workflows`: every path through each workflow (each option of a `decide` or `gate`), as a
  list of steps with stub outputs that the runner walks through the harness;
- `exact_invocation`: per ASK rule with a `once` grant, an approved call and its variants
  (another tool_call_id, each argument changed, each execution parameter changed).

The runtime (the same one the generated package loads) is used here only to check the examples
it generates (a valid example must validate; a variant must still be asked), never to decide
what a test expects: expected decisions come from the analysis and the spec, and expected
availability from the compiler's own evaluator of conditions (`analysis.concrete`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harnessc.runtime.availability import AvailabilityChecker, Facts
from harnessc.runtime.canonical import Execution
from harnessc.runtime.model import (
    And,
    Compare,
    Condition,
    DefaultDecision,
    EnumMember,
    FactCall,
    Field,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    Policy,
    RecordValue,
    Rule,
    Schema,
    Selector,
    Spec,
    SpecTest,
    Step,
    Tool,
    Type,
    Workflow,
)
from harnessc.runtime.normalize import DELEGATE_TASK, Validator
from harnessc.runtime.policy import CallContext, PolicyEngine
from harnessc.runtime.sessions import surface_tools

from ..analysis.concrete import Call, rule_matches
from ..analysis.examples import NoExampleError, string_example
from ..analysis.policy import Finding, PolicyAnalysis, Witness, analyse_policies

__all__ = ["NoExampleError", "example_input", "example_value", "plan_cases"]

ACTOR = {"user": "u-generated", "role": "member", "tenant": "tenant-1"}
"""The actor of sessions whose cases do not come from a witness."""
RESOURCE = {"tenant": "tenant-1"}
EXECUTION_KEYS = {"command", "cwd", "env", "timeout", "target"}
MAX_PATHS = 32
"""Workflow paths planned per workflow; more are left out with a note."""


# ---------------------------------------------------------------------------------------------
# Example values from schemas


def example_value(field: Field | None, type_: Type) -> Any:
    """A value of `type_` meeting the field's constraints (its default when it has one)."""
    if field is not None and field.default is not None:
        return copy.deepcopy(field.default)
    name = type_.name
    low = field.min if field is not None and field.min is not None else None
    high = field.max if field is not None and field.max is not None else None
    pattern = field.pattern if field is not None else None
    if name in ("string", "path", "url"):
        if pattern is None and name == "path":
            return "/workspace/example.txt"
        if pattern is None and name == "url":
            return "https://example.com/"
        return string_example(pattern, int(low or 0), None if high is None else int(high))
    if name == "duration":
        return "1m"
    if name in ("int", "float"):
        value = low if low is not None else (0 if high is None or high >= 0 else high)
        return int(value) if name == "int" else float(value)
    if name == "bool":
        return False
    if name == "enum":
        if not type_.values:
            raise NoExampleError("the enum has no value")
        return type_.values[0]
    if name == "list":
        assert type_.item is not None
        return [example_value(None, type_.item) for _ in range(int(low or 0))]
    if name == "map":
        return {}
    return example_input(type_.fields)


def example_input(fields: Sequence[Field]) -> dict[str, Any]:
    """The smallest valid object: every required field, nothing else."""
    return {f.name: example_value(f, f.type) for f in fields if f.required}


def _errors(schema: Schema | None, value: Any) -> list[tuple[str, str]]:
    return Validator(schema).errors(value)


# ---------------------------------------------------------------------------------------------
# Facts under which every tool that can be is available


def _wanted_facts(cond: Condition, positive: bool, out: dict[str, Any]) -> None:
    if isinstance(cond, And | Or):
        for item in cond.items:
            _wanted_facts(item, positive, out)
    elif isinstance(cond, Not):
        _wanted_facts(cond.item, not positive, out)
    elif isinstance(cond, Path) and cond.root == "fact" and len(cond.parts) == 1:
        out.setdefault(cond.parts[0], positive)
    elif isinstance(cond, Compare) and cond.op in ("==", "!="):
        for side, other in ((cond.left, cond.right), (cond.right, cond.left)):
            if (
                isinstance(side, Path)
                and side.root == "fact"
                and len(side.parts) == 1
                and isinstance(other, Literal)
                and (cond.op == "==") == positive
            ):
                out.setdefault(side.parts[0], other.value)


def _mcp_state(spec: Spec, server: str) -> dict[str, Any]:
    declared = spec.mcp_servers[server]
    discovered = {}
    for tool_id in sorted(declared.tools):
        tool = spec.tools.get(tool_id)
        if tool is not None:
            discovered[_mcp_name(tool)] = tool.input.to_json_schema()
    return {
        "enabled": True,
        "connected": True,
        "transport_valid": True,
        "disclaimer_accepted": True,
        "agent_access": True,
        "discovered": discovered,
        "registered": None,
    }


def _mcp_name(tool: Tool) -> str:
    return tool.id.split(":", 3)[3] if tool.id.count(":") >= 3 else tool.id


def available_facts(spec: Spec) -> dict[str, Any]:
    """Facts (as case data) under which every tool whose `requires` the compiler can satisfy
    is available: every connection up, every runtime running, every MCP server fully set up,
    and the declared facts its conditions compare with a literal."""
    values: dict[str, Any] = {}
    for tool_id in sorted(spec.tools):
        requires = spec.tools[tool_id].requires
        if requires is not None:
            _wanted_facts(requires, True, values)
    return {
        "values": {k: values[k] for k in sorted(values) if k in spec.facts},
        "connected": sorted(spec.connections),
        "running": sorted(spec.runtimes),
        "mcp": {server: _mcp_state(spec, server) for server in sorted(spec.mcp_servers)},
    }


def facts_of(data: Mapping[str, Any]) -> Facts:
    """The runtime `Facts` of case data (as the generated runner builds them)."""
    from harnessc.runtime.availability import McpState

    mcp = {}
    for server, state in data.get("mcp", {}).items():
        fields = dict(state)
        if fields.get("registered") is not None:
            fields["registered"] = frozenset(fields["registered"])
        mcp[server] = McpState(**fields)
    return Facts.of(
        data.get("values", {}),
        connected=data.get("connected", ()),
        running=data.get("running", ()),
        mcp=mcp,
    )


# ---------------------------------------------------------------------------------------------
# Availability of one tool (language.md §1, §8): what a case's facts must make true


def availability_parts(spec: Spec, tool: Tool) -> list[Condition]:
    """What a tool's availability asks of the facts: the runtime or connection that provides a
    dynamic tool, then its `requires`. The MCP conditions of §8 are not facts a condition
    reads; every case carries them all true."""
    parts: list[Condition] = []
    provider = tool.provided_by if tool.kind == "dynamic" else None
    if provider in spec.runtimes:
        parts.append(FactCall(func="running", name=provider))  # type: ignore[arg-type]
    elif provider in spec.connections:
        parts.append(FactCall(func="connected", name=provider))  # type: ignore[arg-type]
    if tool.requires is not None:
        parts.append(tool.requires)
    return parts


def availability_condition(spec: Spec, tool: Tool) -> Condition | None:
    """`availability_parts` as one condition (None: nothing is asked of the facts)."""
    parts = availability_parts(spec, tool)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(items=tuple(parts))


def conjuncts(cond: Condition) -> list[Condition]:
    """The items of a condition's `and`s, nested ones flattened, in text order."""
    if isinstance(cond, And):
        return [c for item in cond.items for c in conjuncts(item)]
    return [cond]


def condition_text(cond: Condition) -> str:
    """A condition as the spec writes it, which is how a refusal names a failed condition."""
    from .spec_text import spec_text

    return spec_text(cond)


def _facts_call(tool: str, facts: Mapping[str, Any]) -> Call:
    return Call(
        tool=tool,
        facts=dict(facts.get("values", {})),
        connections={c: True for c in facts.get("connected", ())},
        runtimes={r: True for r in facts.get("running", ())},
    )


def fact_holds(spec: Spec, tool: str, cond: Condition, facts: Mapping[str, Any]) -> bool:
    """Whether a condition over facts holds under case facts (the compiler's own evaluator,
    the one that re-judges witnesses, never the runtime's)."""
    rule = Rule(
        label="availability",
        policy="availability",
        effect="allow",
        selectors=(Selector(kind="all", text="*"),),
        condition=cond,
    )
    return rule_matches(spec, rule, _facts_call(tool, facts))


def failed_conditions(spec: Spec, tool: Tool, facts: Mapping[str, Any]) -> list[str]:
    """The conditions an `unavailable` refusal names under these facts (the MCP state aside):
    the provider when it is down, and the first false item of `requires` (nested `and`s
    entered)."""
    failed = []
    for part in availability_parts(spec, tool):
        if fact_holds(spec, tool.id, part, facts):
            continue
        while isinstance(part, And):
            part = next(i for i in part.items if not fact_holds(spec, tool.id, i, facts))
        failed.append(condition_text(part))
    return list(dict.fromkeys(failed))  # one per condition, as the refusal lists them


AVAILABLE = "(available) "
"""The prefix of the policies that solve each tool's availability (never in a package)."""


def availability_analysis(spec: Spec) -> PolicyAnalysis | None:
    """The policy analysis once more, over calls to available tools only: every policy gets,
    first, a DENY of each tool with availability conditions when they are false, so a rule wins
    there only with facts under which its tool is available (a DENY that comes first beats every
    rule); and a policy `(available) TOOL` allows the tool exactly when it is available, whose
    witness is facts under which it is (z3 solves `requires` with the rest of the analysis).
    None when no tool has availability conditions: the first analysis is that analysis."""
    conditions = {
        tool_id: cond
        for tool_id in sorted(spec.tools)
        if (cond := availability_condition(spec, spec.tools[tool_id])) is not None
    }
    if not conditions:
        return None

    def selector(tool_id: str) -> tuple[Selector, ...]:
        return (Selector(kind="id", value=tool_id, text=tool_id),)

    policies: dict[str, Policy] = {}
    for name in sorted(spec.policies):
        policy = spec.policies[name]
        guards = tuple(
            Rule(
                label=f"{name}{AVAILABLE}{tool_id}",
                policy=name,
                effect="deny",
                selectors=selector(tool_id),
                condition=Not(item=cond),
                reason="unavailable",
            )
            for tool_id, cond in conditions.items()
        )
        policies[name] = policy.model_copy(update={"rules": guards + policy.rules})
    for tool_id, cond in conditions.items():
        name = AVAILABLE + tool_id
        policies[name] = Policy(
            name=name,
            default=DefaultDecision(effect="deny", reason="unavailable"),
            rules=(
                Rule(
                    label=name,
                    policy=name,
                    effect="allow",
                    selectors=selector(tool_id),
                    condition=cond,
                ),
            ),
        )
    return analyse_policies(spec.model_copy(update={"policies": policies}))


def mcp_of(spec: Spec, tool_id: str, mcp: Mapping[str, Any]) -> dict[str, Any]:
    """The MCP state a call to `tool_id` needs: its server's, fully set up (else nothing)."""
    tool = spec.tools.get(tool_id)
    server = tool.mcp_server if tool is not None and tool.kind == "mcp" else None
    if server is None or server not in mcp:
        return {}
    return {server: copy.deepcopy(mcp[server])}


def _witness_facts(spec: Spec, witness: Witness, mcp: Mapping[str, Any]) -> dict[str, Any]:
    c = witness.call
    return {
        "values": dict(c.facts),
        "connected": sorted(n for n, up in c.connections.items() if up),
        "running": sorted(n for n, up in c.runtimes.items() if up),
        "mcp": mcp_of(spec, c.tool, mcp),
    }


def tool_facts(
    spec: Spec, tool: Tool, solved: PolicyAnalysis | None, mcp: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Facts under which `tool` is available (every MCP server fully set up), or None when
    the analysis finds none (its `requires` can never hold)."""
    if availability_condition(spec, tool) is None:
        return {"values": {}, "connected": [], "running": [], "mcp": mcp_of(spec, tool.id, mcp)}
    name = AVAILABLE + tool.id
    witness = solved.witness(name, name) if solved is not None else None
    if witness is None:
        return None
    # only the facts are used: a witness whose arguments are approximate still serves
    facts = _witness_facts(spec, witness, mcp)
    return facts if not failed_conditions(spec, tool, facts) else None


def _other_values(spec: Spec, fact: str, current: Any, cond: Condition) -> list[Any]:
    """Values to try for a fact to make a condition false, nearest first."""
    found: list[Any] = []
    declared = spec.facts.get(fact)
    kind = declared.type.name if declared is not None else None
    if kind == "bool" or isinstance(current, bool):
        found.append(not current if isinstance(current, bool) else False)
    literals = []
    stack: list[object] = [cond]
    while stack:
        node = stack.pop()
        if isinstance(node, And | Or):
            stack.extend(node.items)
        elif isinstance(node, Not):
            stack.append(node.item)
        elif isinstance(node, Compare):
            stack.extend((node.left, node.right))
        elif isinstance(node, ListValue):
            stack.extend(node.items)
        elif isinstance(node, Literal | EnumMember):
            literals.append(node.value if isinstance(node, Literal) else node.name)
    for value in literals:
        if isinstance(value, bool):
            found.append(not value)
        elif isinstance(value, int | float):
            found.extend((value + 1, value - 1))
        elif isinstance(value, str):
            found.extend((value + "-other", value))
    if kind == "enum" and declared is not None:
        found.extend(declared.type.values)
    return [v for v in found if v != current]


def _reads(cond: object) -> list[tuple[str, str]]:
    """What a condition over facts reads: `("fact", name)`, `("connected", c)`, `("running", r)`."""
    if isinstance(cond, FactCall):
        return [(cond.func, cond.name)]
    if isinstance(cond, Path):
        return [("fact", cond.parts[0])] if cond.root == "fact" and cond.parts else []
    if isinstance(cond, And | Or | ListValue):
        return [r for i in cond.items for r in _reads(i)]
    if isinstance(cond, Not):
        return _reads(cond.item)
    if isinstance(cond, Compare):
        return _reads(cond.left) + _reads(cond.right)
    return []


def violating_facts(
    spec: Spec, tool: Tool, facts: Mapping[str, Any], target: Condition
) -> dict[str, Any] | None:
    """The facts changed as little as possible so that `target` (one item of the tool's
    availability condition) is false and every other item still holds; None if no such
    change is found."""
    condition = availability_condition(spec, tool)
    assert condition is not None
    # a dynamic tool's provider may be in its `requires` too: the same condition, once
    others = [c for c in conjuncts(condition) if condition_text(c) != condition_text(target)]
    candidates: list[dict[str, Any]] = []
    for what, name in dict.fromkeys(_reads(target)):
        changed = copy.deepcopy(dict(facts))
        if what in ("connected", "running"):
            changed[what] = [n for n in changed.get(what, []) if n != name]
            candidates.append(changed)
            continue
        values = changed.get("values", {})
        absent = {k: v for k, v in values.items() if k != name}
        candidates.append({**changed, "values": absent})
        for value in _other_values(spec, name, values.get(name), target):
            candidates.append({**changed, "values": {**values, name: value}})
    for candidate in candidates:
        if not fact_holds(spec, tool.id, target, candidate) and all(
            fact_holds(spec, tool.id, c, candidate) for c in others
        ):
            return candidate
    return None


# ---------------------------------------------------------------------------------------------
# Calls as case data

_SURFACES: dict[tuple[int, str], frozenset[str]] = {}
"""Surface → its public tools, for the spec being planned (`plan_cases` clears it)."""


def _surface(spec: Spec, name: str | None) -> frozenset[str]:
    if name is None or name not in spec.surfaces:
        return frozenset()
    key = (id(spec), name)
    found = _SURFACES.get(key)
    if found is None:
        found = _SURFACES[key] = frozenset(surface_tools(spec, spec.surfaces[name]))
    return found


def _call_case(
    spec: Spec,
    *,
    policy: str,
    tool: str,
    args: Mapping[str, Any],
    actor: Mapping[str, Any],
    resource: Mapping[str, Any],
    task: Mapping[str, Any],
    env: Mapping[str, Any],
    facts: Mapping[str, Any],
    connected: Iterable[str],
    running: Iterable[str],
    execution: Mapping[str, Any],
    mcp: Mapping[str, Any],
    alone: str | None = None,
) -> dict[str, Any]:
    """A call judged under `policy`, and the way the runner judges it: through a session of an
    agent whose policy it is and whose surface holds the tool (`via: session`), else by the
    policy engine on the call's context (`via: policy`, with the reason in `note`); `alone`
    says why the policy alone judges it even where a session could make the call."""
    execution = dict(execution)
    tool_call_id = execution.pop("tool_call_id", None)
    case: dict[str, Any] = {
        "policy": policy,
        "tool": tool,
        "args": dict(args),
        "actor": dict(actor),
        "resource": dict(resource),
        "task": dict(task),
        "env": dict(env),
        "facts": {
            "values": dict(facts),
            "connected": sorted(connected),
            "running": sorted(running),
            "mcp": mcp_of(spec, tool, mcp),
        },
        "tool_call_id": tool_call_id if isinstance(tool_call_id, str) else "call-1",
        "execution": execution,
        "unavailable": None,
    }
    agent, note = _session_agent(spec, policy, tool, args, execution)
    if alone is not None:
        agent, note = None, alone
    case["via"] = "session" if agent is not None else "policy"
    case["agent"] = agent
    case["note"] = note
    if agent is None:
        _fill_defaults(spec, case)
    return case


def _fill_defaults(spec: Spec, case: dict[str, Any]) -> None:
    """As normalize would: the policy judges arguments with their defaults."""
    spec_tool = spec.tools.get(case["tool"])
    if spec_tool is not None:
        for f in spec_tool.input.fields:
            if f.name not in case["args"] and f.default is not None:
                case["args"][f.name] = copy.deepcopy(f.default)


def _execution_ok(execution: Mapping[str, Any]) -> bool:
    if not set(execution) <= EXECUTION_KEYS:
        return False
    timeout = execution.get("timeout")
    env = execution.get("env")
    return (timeout is None or (isinstance(timeout, int) and not isinstance(timeout, bool))) and (
        env is None or (isinstance(env, dict) and all(isinstance(v, str) for v in env.values()))
    )


def _session_agent(
    spec: Spec,
    policy: str,
    tool_id: str,
    args: Mapping[str, Any],
    execution: Mapping[str, Any],
) -> tuple[str | None, str | None]:
    tool = spec.tools.get(tool_id)
    if tool is None:
        return None, f"`{tool_id}` is not a registered tool"
    if tool.kind in ("legacy", "primitive", "private"):
        return None, f"`{tool_id}` is a {tool.kind} tool: no planner session can call it"
    agents = [n for n in sorted(spec.agents) if spec.agents[n].policy == policy]
    if not agents:
        return None, "no agent judges its calls by this policy"
    on_surface = [
        n
        for n in agents
        if spec.agents[n].surface in spec.surfaces
        and tool_id in _surface(spec, spec.agents[n].surface)
    ]
    if not on_surface:
        return None, f"no agent with this policy has `{tool_id}` on its surface"
    errors = _errors(tool.input, dict(args))
    if errors:
        path, message = errors[0]
        return None, f"the call's arguments do not pass the input schema: {message} at `{path}`"
    if not _execution_ok(execution):
        return None, "the call reads execution parameters a session call cannot carry"
    return on_surface[0], None


def _expect(
    effect: str,
    rule: str | None,
    approvers: Iterable[Mapping[str, str]] = (),
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "effect": effect,
        "rule": rule,
        "approvers": [{"kind": a["kind"], "value": a["value"]} for a in approvers],
        "reason": reason,
    }


def plan_witnesses(
    spec: Spec,
    analysis: PolicyAnalysis,
    findings: Sequence[Finding],
    solved: PolicyAnalysis | None = None,
    mcp: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per rule, a call it wins with its tool available: the witness of `solved` (the analysis
    over available tools, `availability_analysis`). A rule that wins only while its tool is
    unavailable (`deny kind:dynamic when not running(r)`) keeps the first analysis's witness:
    the policy alone must still decide it so, and a session must refuse the call `unavailable`
    before any policy sees it (`unavailable` lists the conditions the refusal names)."""
    mcp = mcp if mcp is not None else {}
    why: dict[tuple[str, str], str] = {}
    for finding in findings:
        if finding.rule is not None and finding.kind in ("never-wins", "unsatisfiable"):
            why.setdefault((finding.policy, finding.rule), finding.message)
    cases = []
    for policy_name in sorted(spec.policies):
        for index, rule in enumerate(spec.policies[policy_name].rules):
            base = {"id": f"{policy_name}::{rule.label}", "rule": rule.label, "index": index}
            witness = analysis.witness(policy_name, rule.label)
            if witness is None:
                reason = why.get((policy_name, rule.label), "the analysis found no call it wins")
                cases.append({**base, "policy": policy_name, "skip": reason})
                continue
            available = solved.witness(policy_name, rule.label) if solved is not None else witness
            if available is not None:
                witness = available
            c = witness.call
            case = _call_case(
                spec,
                policy=policy_name,
                tool=c.tool,
                args=c.args,
                actor=c.actor,
                resource=c.resource,
                task=c.task,
                env=c.env,
                facts=c.facts,
                connected=[n for n, up in c.connections.items() if up],
                running=[n for n, up in c.runtimes.items() if up],
                execution=c.execution,
                mcp=mcp,
            )
            if available is None:
                failed = failed_conditions(spec, spec.tools[c.tool], case["facts"])
                case["unavailable"] = {"conditions": failed}
                _fill_defaults(spec, case)
            d = witness.decision
            case.update(base)
            case["expect"] = _expect(d.effect, d.rule, d.approvers)
            case["skip"] = (
                None
                if witness.exact
                else "the analysis could only approximate this rule's witness: "
                + "; ".join(witness.notes or ["inexact"])
            )
            cases.append(case)
    return cases


def _rule_label(spec: Spec, policy: str, written: str | None) -> str | None:
    """The label a decision shows for a rule as a test's `expect rule` names it."""
    if written is None:
        return None
    found = spec.policies.get(policy)
    for rule in found.rules if found is not None else ():
        names = {rule.label}
        _, sep, tail = rule.label.partition(".")
        if sep:
            names.update({tail, f"{rule.policy}.{tail}"})
        elif "#" in rule.label:
            names.add(f"{rule.policy.rpartition('.')[0]}.{rule.label}")
        if written in names:
            return rule.label
    return written


SPEC_TESTS_ALONE = (
    "a `test` block judges the policy alone, as `harnessc test` does (language.md §13): "
    "availability, the surface and the input schema are not part of it"
)


def plan_spec_tests(spec: Spec) -> list[dict[str, Any]]:
    """The root module's `test` blocks, in source order (as `harnessc test` runs them), each
    judged by the policy engine on the test's call: a test pins a policy decision, so a test
    of a DENY that guards an unavailable tool (`not running(r)`) means what it says."""
    from ..testing import policy_of, split_facts

    prefix = f"{spec.root_module}."
    tests: list[SpecTest] = [t for k, t in spec.tests.items() if k.startswith(prefix)]
    tests.sort(key=lambda t: (t.origin.line, t.origin.column) if t.origin else (0, 0))
    cases = []
    for test in tests:
        policy = policy_of(spec, test)
        base = {"id": test.name, "name": test.name}
        if test.expect is None or policy is None or test.tool is None:
            cases.append({**base, "skip": "the test states no expected decision or policy"})
            continue
        values, connected, running = split_facts(spec, test)
        case = _call_case(
            spec,
            policy=spec.policy(policy).name,  # type: ignore[union-attr]
            tool=test.tool,
            args=test.args,
            actor=test.actor or {},
            resource=test.resource or {},
            task=test.task or {},
            env=test.env or {},
            facts=values,
            connected=connected,
            running=running,
            execution=test.execution or {},
            mcp={},
            alone=SPEC_TESTS_ALONE,
        )
        e = test.expect
        approvers = [e.approver.model_dump(mode="json")] if e.approver is not None else []
        case.update(base)
        case["expect"] = _expect(
            e.effect, _rule_label(spec, case["policy"], e.rule), approvers, e.reason
        )
        case["expect"]["any_rule"] = e.rule is None
        case["skip"] = None
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# Schemas


def _unknown_field(tool: Tool) -> str:
    names = {f.name for f in tool.input.fields}
    name, n = "unexpected", 2
    while name in names:
        name, n = f"unexpected_{n}", n + 1
    return name


def _tool_route(spec: Spec, tool: Tool) -> dict[str, Any]:
    """How a generated test reaches a tool's normalize: a planner session, a skill session,
    or (for tools no session may call) the runtime's validator of its input schema."""
    if tool.kind == "private" and tool.skill:
        for name in sorted(spec.agents):
            agent = spec.agents[name]
            if not agent.skills or tool.skill in agent.skills:
                return {"via": "skill", "agent": name, "skill": tool.skill, "note": None}
        return {"via": "validator", "agent": None, "skill": None, "note": "no agent has its skill"}
    if tool.kind in ("legacy", "primitive"):
        note = f"a {tool.kind} tool is never on a surface: its schema is checked directly"
        return {"via": "validator", "agent": None, "skill": None, "note": note}
    for name in sorted(spec.agents):
        surface = spec.surfaces.get(spec.agents[name].surface or "")
        if surface is not None and tool.id in _surface(spec, surface.name):
            return {"via": "session", "agent": name, "skill": None, "note": None}
    note = "no agent has it on its surface: its schema is checked directly"
    return {"via": "validator", "agent": None, "skill": None, "note": note}


def plan_schemas(
    spec: Spec, solved: PolicyAnalysis | None, mcp: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Per tool, a valid and an invalid input, normalized in a session whose facts make the
    tool available (normalize refuses an unavailable tool before it reads the arguments)."""
    cases = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        if tool.id == DELEGATE_TASK:
            continue
        case: dict[str, Any] = {"id": tool_id, "tool": tool_id, **_tool_route(spec, tool)}
        case["facts"] = None
        if case["via"] != "validator":
            case["facts"] = tool_facts(spec, tool, solved, mcp)
            if case["facts"] is None:
                note = "its availability conditions never hold: its schema is checked directly"
                case.update({"via": "validator", "agent": None, "skill": None, "note": note})
        try:
            valid = example_input(tool.input.fields)
            errors = _errors(tool.input, valid)
            if errors:
                raise NoExampleError(f"the generated example fails: {errors[0][1]}")
            case["valid"], case["skip_valid"] = valid, None
        except NoExampleError as error:
            case["valid"], case["skip_valid"] = None, f"no valid example: {error}"
        required = [f for f in tool.input.fields if f.required]
        base = case["valid"] if case["valid"] is not None else {}
        if required:
            missing = required[0].name
            invalid = {k: v for k, v in base.items() if k != missing}
            case["invalid"] = invalid
            case["invalid_path"] = f"$.{missing}"
            case["invalid_message"] = f"the required field `{missing}` is missing"
        else:
            extra = _unknown_field(tool)
            case["invalid"] = {**base, extra: "x"}
            case["invalid_path"] = f"$.{extra}"
            case["invalid_message"] = f"unknown field `{extra}`"
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# Surfaces, MCP, delegation

_REFUSED = {"legacy": "legacy-tool", "primitive": "not-on-surface", "private": "skill-private"}


def plan_surfaces(spec: Spec, facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    availability = AvailabilityChecker(spec).check(facts_of(facts))
    never = [
        {"tool": t, "code": _REFUSED[spec.tools[t].kind]}
        for t in sorted(spec.tools)
        if spec.tools[t].kind in _REFUSED
    ]
    cases = []
    for name in sorted(spec.surfaces):
        surface = spec.surfaces[name]
        agents = [a for a in sorted(spec.agents) if spec.agents[a].surface == name]
        public = list(surface_tools(spec, surface))
        expected = [t for t in public if availability.available(t)]
        case = {
            "id": name,
            "surface": name,
            "agent": agents[0] if agents else None,
            "facts": facts,
            "limit": surface.limit,
            "public": sorted(public),
            "expected": sorted(expected),
            "unavailable": sorted(t for t in public if t not in expected),
            "ranked": len(expected) > surface.limit,
            "never": never,
            "skip": None if agents else "no agent has this surface, so no session exposes it",
        }
        cases.append(case)
    return cases


_MCP_CONDITIONS = (
    ("server disabled", {"enabled": False}, "enabled and connected"),
    ("server not connected", {"connected": False}, "enabled and connected"),
    ("transport not valid", {"transport_valid": False}, "transport valid"),
    ("disclaimer not accepted", {"disclaimer_accepted": False}, "disclaimer accepted"),
    ("tool not discovered", None, "tool discovered with the declared schema"),
    ("tool discovered with another schema", None, "tool discovered with the declared schema"),
    ("agent access switched off", {"agent_access": False}, "agent access switched on"),
    ("projected implementation unregistered", None, "projected implementation registered"),
)
"""Each way one of the six conditions of language.md §8 fails: what changes in the server's
state, and the condition (as §8 names it) that the `unavailable` refusal must name."""


def plan_mcp(
    spec: Spec, facts: Mapping[str, Any], solved: PolicyAnalysis | None = None
) -> list[dict[str, Any]]:
    """Per MCP-projected tool, each of the six conditions of §8 made false in turn: the tool
    is unavailable, not exposed, and a call to it is refused `unavailable` at normalize."""
    cases = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        if tool.kind != "mcp" or not tool.mcp_server or tool.mcp_server not in spec.mcp_servers:
            continue
        server = tool.mcp_server
        name = _mcp_name(tool)
        agents = []
        for agent in sorted(spec.agents):
            surface = spec.surfaces.get(spec.agents[agent].surface or "")
            if surface is not None and tool_id in _surface(spec, surface.name):
                agents.append(agent)
        base = tool_facts(spec, tool, solved, facts["mcp"]) or facts
        full = base["mcp"][server]
        variants = []
        for what, change, failed in _MCP_CONDITIONS:
            state = copy.deepcopy(full)
            if change is not None:
                state.update(change)
            elif what == "tool not discovered":
                del state["discovered"][name]
            elif what == "tool discovered with another schema":
                schema = state["discovered"][name]
                schema.setdefault("properties", {})["unexpected_argument"] = {"type": "string"}
                schema["required"] = [*schema.get("required", []), "unexpected_argument"]
            else:
                others = [t for t in sorted(spec.mcp_servers[server].tools) if t != tool_id]
                state["registered"] = others
            variants.append({"condition": what, "mcp": state, "failed": failed})
        try:
            args: dict[str, Any] | None = example_input(tool.input.fields)
        except NoExampleError:
            args = None
        cases.append(
            {
                "id": tool_id,
                "tool": tool_id,
                "server": server,
                "agent": agents[0] if agents else None,
                "facts": base,
                "args": args,
                "variants": variants,
            }
        )
    return cases


def _authorised_call(
    spec: Spec, tool: Tool, target: Condition, witnesses: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """A witness call to `tool` that a session makes and the policy allows or asks, with the
    facts that then break `target` (None when there is none): authorised under the witness's
    facts, it must still not run once the facts change."""
    for case in witnesses:
        if (
            case.get("skip")  # a skipped witness may have no call at all
            or case["tool"] != tool.id
            or case["via"] != "session"
            or case["unavailable"] is not None
            or case["expect"]["effect"] not in ("allow", "ask")
        ):
            continue
        changed = violating_facts(spec, tool, case["facts"], target)
        if changed is None:
            continue
        call = {
            k: copy.deepcopy(case[k])
            for k in (
                "id",
                "agent",
                "actor",
                "resource",
                "task",
                "env",
                "facts",
                "tool",
                "args",
                "tool_call_id",
                "execution",
                "expect",
            )
        }
        # a grant for the task (`grant task`) needs a task to bind
        call["task"] = {"id": "task-1", **call["task"]}
        return {**call, "changed": changed}
    return None


def plan_availability(
    spec: Spec,
    solved: PolicyAnalysis | None,
    mcp: Mapping[str, Any],
    witnesses: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Per tool with availability conditions (a dynamic tool's provider, `requires`) and per
    item of them (`and`s flattened): facts under which only that item is false, and the call a
    session must refuse `unavailable` at normalize, naming it. Where a witness call of the
    tool is allowed or asked, the same item breaking after the call was authorised must stop
    it before it runs (`invoke`)."""
    cases = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        condition = availability_condition(spec, tool)
        if condition is None or tool.id == DELEGATE_TASK:
            continue
        route = _tool_route(spec, tool)
        base = tool_facts(spec, tool, solved, mcp)
        try:
            args: dict[str, Any] | None = example_input(tool.input.fields)
            skip = None
        except NoExampleError as error:
            args, skip = None, f"no valid example input: {error}"
        if route["via"] == "validator":
            skip = route["note"].split(":")[0] + ": no session can call it"
        elif base is None:
            skip = "its availability conditions never hold"
        items: dict[str, Condition] = {}
        for item in conjuncts(condition):
            items.setdefault(condition_text(item), item)
        for text, target in items.items():
            case: dict[str, Any] = {
                "id": f"{tool_id}::{text}",
                "tool": tool_id,
                **route,
                "args": args,
                "condition": text,
                "facts": None,
                "conditions": [],
                "invoke": None,
                "skip": skip,
            }
            if skip is None:
                assert base is not None
                changed = violating_facts(spec, tool, base, target)
                if changed is None:
                    case["skip"] = f"no facts were found under which only `{text}` is false"
                else:
                    case["facts"] = changed
                    case["conditions"] = failed_conditions(spec, tool, changed)
                    case["invoke"] = _authorised_call(spec, tool, target, witnesses)
            cases.append(case)
    return cases


def plan_delegation(spec: Spec) -> list[dict[str, Any]]:
    return [
        {"id": name, "agent": name, "targets": sorted(spec.agents[name].delegates)}
        for name in sorted(spec.agents)
    ]


# ---------------------------------------------------------------------------------------------
# The exact-invocation regression


def _changed(field: Field, value: Any) -> Iterable[Any]:
    """Other values for a field, nearest first (each is checked by the validator)."""
    name = field.type.name
    if name == "enum":
        yield from (v for v in field.type.values if v != value)
    elif name == "bool":
        yield not value
    elif name == "int" and isinstance(value, int):
        yield from (value + 1, value - 1)
    elif name == "float" and isinstance(value, int | float):
        yield from (value + 0.001, value - 0.001, value / 2)
    elif name in ("string", "url") and isinstance(value, str):
        yield from (value + "0", value + "a", "0" + value, value[:-1], value + "-b")
    elif name == "path" and isinstance(value, str):
        yield from (value.rstrip("/") + "/changed", value + "0")
    elif name == "duration":
        yield from ("2m", "3m")
    elif name == "list" and isinstance(value, list):
        yield [*value, value[-1]] if value else ["x"]
        if len(value) > (field.min or 0):
            yield value[:-1]
    elif name == "map" and isinstance(value, dict):
        yield {**value, "changed": "x"}


def _session_context(
    case: Mapping[str, Any], args: Mapping[str, Any], execution: Execution, tool_call_id: str
) -> CallContext:
    """The call as a session shows it to policy (`Session.context`)."""
    params: dict[str, Any] = {}
    for key, value in (
        ("command", execution.command),
        ("cwd", execution.cwd),
        ("env", execution.env),
        ("timeout", execution.timeout_ms),
        ("target", execution.target),
    ):
        if value is not None:
            params[key] = value
    facts = case["facts"]
    return CallContext(
        case["tool"],
        args,
        case["actor"],
        case["resource"],
        case["task"],
        case["env"],
        facts["values"],
        frozenset(facts["connected"]),
        frozenset(facts["running"]),
        tool_call_id,
        params,
    )


BASE_EXECUTION = {
    "cwd": "/workspace",
    "env": {"MODE": "test"},
    "timeout": 60000,
    "target": "target-1",
}


def _still_asked(
    engine: PolicyEngine,
    validator: Validator,
    case: Mapping[str, Any],
    policy: str,
    label: str,
    args: Mapping[str, Any],
    exe: Mapping[str, Any],
    tool_call_id: str,
) -> bool:
    """Whether a session's call with these arguments and execution is still asked by `label`."""
    normalized, errors = validator.run(dict(args))
    if errors:
        return False
    run = Execution(
        command=exe.get("command"),
        cwd=exe.get("cwd"),
        env=exe.get("env"),
        timeout_ms=exe.get("timeout"),
        target=exe.get("target"),
    )
    d = engine.decide(policy, _session_context(case, normalized, run, tool_call_id))
    return d.effect == "ask" and d.rule == label


def plan_exact_invocation(
    spec: Spec, witnesses: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    engine = PolicyEngine(spec)
    judged_by_agents = {a.policy for a in spec.agents.values()}
    cases = []
    for witness in witnesses:
        if witness.get("skip") or witness["unavailable"] or witness["expect"]["effect"] != "ask":
            continue
        if witness["policy"] not in judged_by_agents:
            continue  # the same rule is tested under the policies that include it
        policy = spec.policies[witness["policy"]]
        rule = policy.rules[witness["index"]]
        case: dict[str, Any] = {**copy.deepcopy(dict(witness)), "variants": []}
        case["task"] = {"id": "task-1", **case["task"]}
        grant = rule.grant.scope if rule.grant is not None else "once"
        if grant != "once":
            case["skip"] = (
                f"the rule grants `{grant}`: one approval covers other calls of the "
                f"{'task' if grant == 'task' else 'class'} by design"
            )
            cases.append(case)
            continue
        if case["via"] != "session":
            case["skip"] = f"the witness call cannot be made in a session: {case['note']}"
            cases.append(case)
            continue
        tool = spec.tools[case["tool"]]
        validator = Validator(tool.input)
        execution = {**BASE_EXECUTION, **case["execution"]}
        case["execution"] = execution

        def still_asked(
            args: Mapping[str, Any],
            exe: Mapping[str, Any],
            tcid: str,
            case: Mapping[str, Any] = case,
            validator: Validator = validator,
            policy: str = policy.name,
            label: str = rule.label,
        ) -> bool:
            return _still_asked(engine, validator, case, policy, label, args, exe, tcid)

        if not still_asked(case["args"], execution, case["tool_call_id"]):
            case["skip"] = "the witness with execution parameters is no longer asked by the rule"
            cases.append(case)
            continue
        variants = [
            {
                "what": "another tool_call_id",
                "args": case["args"],
                "execution": execution,
                "tool_call_id": case["tool_call_id"] + "-other",
            }
        ]
        normalized = validator.validate(dict(case["args"]))
        for f in tool.input.fields:
            current = normalized.get(f.name)
            candidates = (
                _changed(f, current) if f.name in normalized else [example_value(None, f.type)]
            )
            for value in itertools.islice(candidates, 8):
                args = {**case["args"], f.name: value}
                if still_asked(args, execution, case["tool_call_id"]):
                    variants.append(
                        {
                            "what": f"argument `{f.name}` changed",
                            "args": args,
                            "execution": execution,
                            "tool_call_id": case["tool_call_id"],
                        }
                    )
                    break
        for key, value in (
            ("cwd", "/workspace/other"),
            ("env", {"MODE": "other"}),
            ("timeout", 120000),
            ("target", "target-2"),
        ):
            exe = {**execution, key: value}
            if still_asked(case["args"], exe, case["tool_call_id"]):
                variants.append(
                    {
                        "what": f"execution `{key}` changed",
                        "args": case["args"],
                        "execution": exe,
                        "tool_call_id": case["tool_call_id"],
                    }
                )
        case["variants"] = variants
        cases.append(case)
    return cases


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


def _holds(cond: Condition, inputs: Mapping[str, Any], steps: Mapping[str, Any]) -> bool:
    """A step's `when` (it reads only `input` and step values) over the path's values."""
    if isinstance(cond, And):
        return all(_holds(i, inputs, steps) for i in cond.items)
    if isinstance(cond, Or):
        return any(_holds(i, inputs, steps) for i in cond.items)
    if isinstance(cond, Not):
        return not _holds(cond.item, inputs, steps)
    if isinstance(cond, Compare):
        left, right = _value(cond.left, inputs, steps), _value(cond.right, inputs, steps)
        if left is None or right is None:
            return False  # an absent value makes a comparison false
        if cond.op == "==":
            return bool(left == right)
        if cond.op == "!=":
            return bool(left != right)
        if cond.op == "in":
            return isinstance(right, list) and left in right
        if cond.op in ("<", "<=", ">", ">=") and all(
            isinstance(v, int | float) for v in (left, right)
        ):
            return bool(
                {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[
                    cond.op
                ]
            )
        raise NoExampleError(f"the compiler cannot evaluate `{cond.op}` in a step's `when`")
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
        if not _errors(schema, trial):
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
            entry = {"step": step.name, "kind": "skipped", "why": why}
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
    spec: Spec, facts: Mapping[str, Any], solved: PolicyAnalysis | None = None
) -> list[dict[str, Any]]:
    """Every path of every workflow, under facts that make the tools its steps call available
    where they can be (a call to an unavailable one is refused `unavailable` and stops the
    path, as the harness would)."""
    engine = PolicyEngine(spec)
    cases = []
    for name in sorted(spec.workflows):
        workflow = spec.workflows[name]
        agent = spec.agents.get(workflow.agent or "") or spec.agents.get(
            spec.qualified(workflow.agent or "")
        )
        base = {"workflow": name}
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
                    if entry["tool"] not in _surface(spec, agent.surface):
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


# ---------------------------------------------------------------------------------------------
# All cases


def plan_cases(
    spec: Spec, analysis: PolicyAnalysis | None, findings: Sequence[Finding] = ()
) -> dict[str, Any]:
    """Every case of the generated suite, as JSON-able data (see the module docstring)."""
    analysis = analysis if analysis is not None else PolicyAnalysis()
    _SURFACES.clear()
    # needs the first analysis done: this one starts a fresh z3 context of its own
    solved = availability_analysis(spec)
    facts = available_facts(spec)
    witnesses = plan_witnesses(spec, analysis, findings, solved, facts["mcp"])
    planned = {
        "witnesses": witnesses,
        "spec_tests": plan_spec_tests(spec),
        "schemas": plan_schemas(spec, solved, facts["mcp"]),
        "surfaces": plan_surfaces(spec, facts),
        "mcp": plan_mcp(spec, facts, solved),
        "availability": plan_availability(spec, solved, facts["mcp"], witnesses),
        "delegation": plan_delegation(spec),
        "workflows": plan_workflows(spec, facts, solved),
        "exact_invocation": plan_exact_invocation(spec, witnesses),
    }
    _SURFACES.clear()
    return planned
