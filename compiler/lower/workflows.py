"""Lowering workflows and their steps, and spec tests."""

from __future__ import annotations

from typing import Any

from harnessc.dsl import syntax as s
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted

from ..modules import head_span
from ..resolve import Module
from .conditions import ConditionLowering
from .core import article, origin


class WorkflowLowering(ConditionLowering):
    """Workflows, their steps, and spec tests."""

    # =========================================================================================
    # Workflows

    def workflow(self, module: Module, node: s.Workflow) -> m.Workflow:
        attrs = self.unique_attrs(node.items, ("agent", "policy", "summary"), "a workflow")
        schemas = self.schema_attrs(node.items, ("input",), "a workflow")
        steps = [self.step(module, i) for i in node.items if isinstance(i, s.Step)]

        def one(key: str) -> str | None:
            names = self.name_values(attrs.get(key))
            return self.ref(names[0], module) if names else None

        return trusted(m.Workflow)(
            name=f"{self.names[module.key]}.{node.name.text}",
            summary=self.text(attrs.get("summary")),
            agent=one("agent"),
            policy=one("policy"),
            input=schemas.get("input"),
            steps=tuple(steps),
            origin=origin(node.name.span),
        )

    STEP_OPTIONS = {  # noqa: RUF012 - a constant table
        "call": {"timeout", "on_failure"},
        "delegate": {"timeout", "on_failure", "context", "output"},
        "decide": {"timeout", "options", "by"},
        "gate": {"timeout", "on_failure"},
    }

    def step(self, module: Module, node: s.Step) -> m.Step:
        action = node.action
        kind = {
            s.CallAction: "call",
            s.DelegateAction: "delegate",
            s.DecideAction: "decide",
            s.GateAction: "gate",
        }[type(action)]
        allowed = self.STEP_OPTIONS[kind]
        seen: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for option in node.options or ():
            key = {
                s.By: "by",
                s.Timeout: "timeout",
                s.Context: "context",
                s.OnFailure: "on_failure",
            }.get(type(option))
            if key is None:
                key = option.key  # type: ignore[union-attr]
            span = head_span(option) if not isinstance(option, s.Attr) else option.span
            if key not in allowed:
                self.not_allowed(
                    key,
                    span,
                    f"{article(kind)} `{kind}` step",
                    help={
                        "options": "only a `decide` step has options",
                        "by": "only a `decide` step waits for a person",
                        "context": "only a `delegate` step passes context",
                        "output": "only a `delegate` step declares an output; a call's is its "
                        "tool's",
                        "on_failure": "a `decide` step ends with its timeout's default",
                    }.get(key),
                )
                continue
            if self.once(seen, key, option, span):
                values[key] = option
        refs: set[str] = set(n.text for n in node.after)
        data: dict[str, Any] = {"name": node.name.text, "kind": kind}
        if isinstance(action, s.CallAction):
            data["tool"] = self.ref(action.tool, module)
            args: dict[str, m.Value] = {}
            first_args: dict[str, s.Arg] = {}
            for arg in action.args:
                if self.once(first_args, arg.name.text, arg, arg.name.span):
                    args[arg.name.text] = self.value(arg.value, module)
            data["args"] = args
        elif isinstance(action, s.DelegateAction):
            data["agent"] = self.ref(action.agent, module)
            data["goal"] = action.goal.value
        elif isinstance(action, s.DecideAction):
            data["question"] = action.question.value
        else:
            data["condition"] = self.cond(action.cond, module)
        if node.when is not None:
            data["when"] = self.cond(node.when, module)
        if "context" in values:
            data["context"] = tuple(self.value(v, module) for v in values["context"].values)
        if "output" in values:
            data["output"] = self.schema(values["output"].schema)
        if kind == "decide":
            self.decide(node, values, data)
        elif "timeout" in values:
            timeout: s.Timeout = values["timeout"]
            data["timeout_ms"] = self.positive_ms(timeout.duration, "a timeout")
            if timeout.default is not None:
                self.not_allowed(
                    "default",
                    timeout.default.span,
                    f"{article(kind)} `{kind}` step",
                    help="only a `decide` step has a default option",
                )
        if "on_failure" in values:
            data["on_failure"] = tuple(self.failure(a) for a in values["on_failure"].actions)
        for value in (*data.get("args", {}).values(), *data.get("context", ())):
            refs |= steps_read(value)
        for key in ("when", "condition"):
            if data.get(key) is not None:
                refs |= steps_read(data[key])
        return trusted(m.Step)(
            **data,
            after=tuple(n.text for n in node.after),
            depends_on=tuple(sorted(refs)),
            compensation=node.compensation,
            origin=origin(node.name.span),
        )

    def decide(self, node: s.Step, values: dict[str, Any], data: dict[str, Any]) -> None:
        where = f"decide step `{node.name.text}`"
        options: list[str] = []
        if "options" not in values:
            self.missing("`options`", node, where, help="write `options approve, reject`")
        else:
            firsts: dict[str, s.Name] = {}
            for name in self.name_values(values["options"]):
                if name.text in firsts:
                    self.report(
                        "H308",
                        f"option `{name.text}` is listed twice",
                        name.span,
                        "listed again here",
                        secondary=[(firsts[name.text].span, "first listed here")],
                        help="remove the second one",
                    )
                    continue
                firsts[name.text] = name
                options.append(name.text)
        data["options"] = tuple(options)
        if "by" in values:
            by: s.By = values["by"]
            data["by"] = trusted(m.Approver)(kind=by.kind, value=by.value.value)  # type: ignore[arg-type]
        if "timeout" in values:
            timeout: s.Timeout = values["timeout"]
            data["timeout_ms"] = self.positive_ms(timeout.duration, "a timeout")
            if timeout.default is not None:
                if options and timeout.default.text not in options:
                    self.report(
                        "H308",
                        f"default `{timeout.default.text}` is not an option of this step",
                        timeout.default.span,
                        "not an option",
                        help=did_you_mean(timeout.default.text, options)
                        or f"choose one of {', '.join(f'`{o}`' for o in options)}",
                    )
                data["default"] = timeout.default.text

    def failure(self, node: s.FailureAction) -> m.FailureAction:
        if node.kind == "retry":
            count = self.at_least_one(node.count, "a retry count") if node.count else 1
            backoff = self.positive_ms(node.backoff, "a backoff") if node.backoff else None
            return trusted(m.FailureAction)(kind="retry", count=count, backoff_ms=backoff)
        if node.kind == "compensate":
            return trusted(m.FailureAction)(
                kind="compensate", step=node.target.text if node.target else None
            )
        approver = (
            trusted(m.Approver)(kind=node.principal, value=node.who.value)  # type: ignore[arg-type]
            if node.who is not None and node.principal is not None
            else None
        )
        return trusted(m.FailureAction)(kind="escalate", approver=approver)

    # =========================================================================================
    # Tests

    def test(self, module: Module, node: s.Test) -> m.SpecTest:
        attrs = self.unique_attrs(
            (i for i in node.items if isinstance(i, s.Attr)), ("policy", "agent"), "a test"
        )
        where = f'test "{node.name.value}"'
        data: dict[str, Any] = {"name": node.name.value}
        policy = self.name_values(attrs.get("policy"))
        if policy:
            data["policy"] = self.ref(policy[0], module)
        else:
            in_scope = self.res.scoped.get(module.key, {}).get("policy", {})
            if len(in_scope) == 1:
                data["policy"] = self.qualified(next(iter(in_scope.values())))
        agent = self.name_values(attrs.get("agent"))
        if agent:
            data["agent"] = self.ref(agent[0], module)
        seen: dict[str, Any] = {}
        before: list[m.SessionStep] = []
        for item in node.items:
            if isinstance(item, s.Said):
                before.append(trusted(m.SessionStep)(said=item.text.value))
            elif isinstance(item, s.Earlier):
                earlier: dict[str, Any] = {}
                for arg in item.args:
                    if self.once(earlier, arg.name.text, arg, arg.name.span):
                        earlier[arg.name.text] = arg
                before.append(
                    trusted(m.SessionStep)(
                        tool=self.ref(item.tool, module),
                        args={k: self.json_value(a.value) for k, a in earlier.items()},
                        result=self.json_value(item.returns) if item.returns else None,
                        ago_ms=item.ago.ms if item.ago is not None else None,
                    )
                )
            elif isinstance(item, s.TestCall):
                if not self.once(seen, "call", item, head_span(item)):
                    continue
                data["tool"] = self.ref(item.tool, module)
                args: dict[str, Any] = {}
                for arg in item.args:
                    if self.once(args, arg.name.text, arg, arg.name.span):
                        args[arg.name.text] = arg
                data["args"] = {k: self.json_value(a.value) for k, a in args.items()}
            elif isinstance(item, s.TestRecord):
                if self.once(seen, item.key, item, item.span):
                    data[item.key] = self.json_value(item.record)
            elif isinstance(item, s.Expect) and self.once(seen, "expect", item, item.span):
                data["expect"] = self.expect(item)
        if "call" not in seen:
            self.missing("`call`", node, where, help="write the call to judge: `call TOOL(…)`")
        if before:
            data["before"] = tuple(before)
        return trusted(m.SpecTest)(**data, origin=origin(node.name.span))

    def expect(self, node: s.Expect) -> m.Expectation:
        approver: m.Approver | None = None
        seen: dict[str, Any] = {}
        data: dict[str, Any] = {}
        for detail in node.details:
            if isinstance(detail, s.Approver):
                if self.once(seen, "approver", detail, detail.span):
                    approver = trusted(m.Approver)(kind=detail.kind, value=detail.value.value)  # type: ignore[arg-type]
            elif self.once(seen, detail.key, detail, detail.span):
                if detail.key == "rule":
                    names = self.name_values(detail)
                    data["rule"] = names[0].text if names else None
                else:
                    data[detail.key] = self.text(detail)
        return trusted(m.Expectation)(effect=node.effect, approver=approver, **data)  # type: ignore[arg-type]


def steps_read(value: object) -> set[str]:
    """The steps a value or condition reads."""
    found: set[str] = set()
    if isinstance(value, m.Path):
        if value.root == "step" and value.parts:
            found.add(value.parts[0])
    elif isinstance(value, m.Compare):
        found |= steps_read(value.left) | steps_read(value.right)
    elif isinstance(value, m.And | m.Or):
        for item in value.items:
            found |= steps_read(item)
    elif isinstance(value, m.Not):
        found |= steps_read(value.item)
    elif isinstance(value, m.Provenance):
        found |= steps_read(value.value)
    elif isinstance(value, m.Quantified):
        found |= steps_read(value.over) | steps_read(value.body)
    elif isinstance(value, m.Length | m.Extract):
        found |= steps_read(value.of)
    elif isinstance(value, m.ListValue):
        for item in value.items:
            found |= steps_read(item)
    elif isinstance(value, m.RecordValue):
        for item in value.fields.values():
            found |= steps_read(item)
    return found
