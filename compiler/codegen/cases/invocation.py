"""The exact-invocation regression: an approved call and its variants, each asked again."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harnessc.runtime.judge.normalize import Validator
from harnessc.runtime.judge.policy import CallContext, PolicyEngine
from harnessc.runtime.model import Field, History, Policy, Spec
from harnessc.runtime.model.canonical import Execution

from ...analysis.concrete import session_terms
from .values import example_value

__all__ = ["plan_exact_invocation"]

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
        if case.get("before") or _reads_history(policy):
            # an approved call that runs is a call of the session's history: it changes what
            # its variants' counts, sums and `called` terms read (and a prelude its sources)
            case["skip"] = (
                "the policy reads the session's history, which the approved call changes for "
                "its variants"
                if not case.get("before")
                else "the rule's decision needs earlier events, which the approved call and its "
                "variants change"
            )
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


def _reads_history(policy: Policy) -> bool:
    """Whether a rule of the policy reads a history term (`count`, `sum`, `called`, …)."""
    return any(
        isinstance(found.term, History)
        for rule in policy.rules
        if rule.condition is not None
        for found in session_terms(rule.condition)
    )
