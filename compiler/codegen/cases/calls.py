"""Calls as case data: the witnesses of the policy analysis and the spec's own tests."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harnessc.runtime.model import (
    Spec,
    SpecTest,
)

from ...analysis.concrete import Call, decide, session_terms
from ...analysis.policy import Finding, PolicyAnalysis
from ...analysis.prelude import Prelude, session_of, session_prelude
from ...analysis.text import session_lines
from ...testing import policy_of, rule_names, split_facts, step_json
from .context import EXECUTION_KEYS, CaseContext
from .facts import failed_conditions, mcp_of
from .values import schema_errors

__all__ = ["PRELUDE_ALONE", "plan_spec_tests", "plan_witnesses", "reads_session"]

# ---------------------------------------------------------------------------------------------
# Calls as case data


def _call_case(
    cx: CaseContext,
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
    before: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A call judged under `policy`, and the way the runner judges it: through a session of an
    agent whose policy it is and whose surface holds the tool (`via: session`), else by the
    policy engine on the call's context (`via: policy`, with the reason in `note`); `alone`
    says why the policy alone judges it even where a session could make the call."""
    spec = cx.spec
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
    agent, note = _session_agent(cx, policy, tool, args, execution)
    if alone is not None:
        agent, note = None, alone
    elif before:
        agent, note = None, PRELUDE_ALONE
    if before:
        case["before"] = [dict(step) for step in before]
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
    cx: CaseContext,
    policy: str,
    tool_id: str,
    args: Mapping[str, Any],
    execution: Mapping[str, Any],
) -> tuple[str | None, str | None]:
    spec = cx.spec
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
        if spec.agents[n].surface in spec.surfaces and tool_id in cx.surface(spec.agents[n].surface)
    ]
    if not on_surface:
        return None, f"no agent with this policy has `{tool_id}` on its surface"
    errors = schema_errors(tool.input, dict(args))
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
    cx: CaseContext,
    analysis: PolicyAnalysis,
    findings: Sequence[Finding],
    solved: PolicyAnalysis | None = None,
    mcp: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per rule, a call it wins with its tool available: the witness of `solved` (the analysis
    over available tools, `analysis.availability`). A rule that wins only while its tool is
    unavailable (`deny kind:dynamic when not running(r)`) keeps the first analysis's witness:
    the policy alone must still decide it so, and a session must refuse the call `unavailable`
    before any policy sees it (`unavailable` lists the conditions the refusal names)."""
    spec = cx.spec
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
            prelude = session_prelude(spec, c) if c.session else None
            if prelude is not None and prelude.args is not None:
                c = _with_text(spec, policy_name, witness, prelude)
            if c.session:
                base["session"] = session_lines(c.session)
            case = _call_case(
                cx,
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
                before=prelude.to_json() if prelude is not None else (),
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
            if prelude is not None and prelude.missing is not None and case["skip"] is None:
                case["skip"] = (
                    f"no session before the call is built for this witness: {prelude.missing}"
                )
            cases.append(case)
    return cases


def _with_text(spec: Spec, policy: str, witness: Any, prelude: Prelude) -> Call:
    """The witness call with the text its prelude gives it (the items a quantifier over
    `hosts(…)` & co needs), when the reference evaluator still decides it as the witness
    says; else the prelude is marked missing, and the case skipped with the reason."""
    assert prelude.args is not None
    call = dataclasses.replace(witness.call, args=prelude.args)
    judged = dataclasses.replace(call, session=session_of(spec, call, prelude.steps))
    again = decide(spec, spec.policies[policy], judged)
    d = witness.decision
    if (again.effect, again.rule) != (d.effect, d.rule):
        prelude.missing = (
            "the text its session needs changes how the call is decided "
            f"(`{again.effect}` by `{again.rule or 'the default'}`)"
        )
        return witness.call  # type: ignore[no-any-return]
    return call


def _rule_label(spec: Spec, policy: str, written: str | None) -> str | None:
    """The label a decision shows for a rule as a test's `expect rule` names it."""
    if written is None:
        return None
    found = spec.policies.get(policy)
    for rule in found.rules if found is not None else ():
        if written in rule_names(rule):
            return rule.label
    return written


def reads_session(spec: Spec) -> bool:
    """Whether a rule reads session state or a `test` has earlier steps: then the generated
    runner replays sessions before calls (`prelude_ledger`)."""
    for policy in spec.policies.values():
        for rule in policy.rules:
            if rule.condition is not None and session_terms(rule.condition):
                return True
    return any(test.before for test in spec.tests.values())


PRELUDE_ALONE = (
    "the call needs a session before it (earlier messages and calls): the policy engine judges "
    "it on the ledger its steps make (`harnessc.runtime.judge.history.prelude_ledger`)"
)
SPEC_TESTS_ALONE = (
    "a `test` block judges the policy alone, as `harnessc test` does (language.md §13): "
    "availability, the surface and the input schema are not part of it"
)


def plan_spec_tests(cx: CaseContext) -> list[dict[str, Any]]:
    """The root module's `test` blocks, in source order (as `harnessc test` runs them), each
    judged by the policy engine on the test's call: a test pins a policy decision, so a test
    of a DENY that guards an unavailable tool (`not running(r)`) means what it says."""
    spec = cx.spec
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
            cx,
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
            before=[step_json(step) for step in test.before],
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
