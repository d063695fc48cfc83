"""Lowering a whole program: each module's declarations in order, then the checks across them."""

from __future__ import annotations

from typing import Any

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import has_errors
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted

from ..resolve import Module, Resolution
from .agents import AgentLowering
from .core import Lowered, origin
from .extend import ExtendLowering
from .policies import PolicyLowering
from .workflows import WorkflowLowering


class _Lowerer(AgentLowering, ExtendLowering, PolicyLowering, WorkflowLowering):
    """Every declaration kind: one per module, all read from one lowering run."""

    def run(self) -> Lowered:
        header: s.Header | None = None
        if self.root is not None:
            header = next((i for i in self.root.syntax.items if isinstance(i, s.Header)), None)
        kinds: dict[str, dict[str, Any]] = {
            k: {}
            for k in (
                "mcp_servers",
                "connections",
                "runtimes",
                "facts",
                "labels",
                "surfaces",
                "risk_tables",
                "skills",
                "agents",
                "workflows",
                "tests",
            )
        }
        for module in self.res.modules:
            for item in module.syntax.items:
                self.declare(module, item, kinds)
        # needs every tool: an `extend` may come before the tool, or in another module
        self.extend_tools()
        # needs every tool: wire names are unique across the build
        self.check_wire_names()
        # needs every policy lowered: includes expand in place
        policies = {name: self.expand(name, []) for name in self.policy_parts}
        for module in self.res.modules:
            for item in module.syntax.items:
                if isinstance(item, s.Surface):
                    built = self.surface(module, item)
                    kinds["surfaces"][built.name] = built
        meta = self.header(header)
        if has_errors(self.diagnostics):
            return Lowered(None, self.diagnostics)
        root_name = self.names[self.root.key] if self.root is not None else ""

        spec = trusted(m.Spec)(
            name=header.name.text if header is not None else root_name,
            root_module=root_name,
            version=meta.get("version"),
            summary=meta.get("summary"),
            tools=dict(sorted(self.tools.items())),
            policies=dict(sorted(policies.items())),
            **{k: dict(sorted(v.items())) for k, v in kinds.items()},
        )
        return Lowered(spec if not has_errors(self.diagnostics) else None, self.diagnostics)

    def header(self, header: s.Header | None) -> dict[str, str | None]:
        if header is None:
            return {}
        attrs = self.unique_attrs(header.items, ("version", "summary", "description"), "a header")
        return {k: self.text(v) for k, v in attrs.items()}

    def declare(self, module: Module, item: object, kinds: dict[str, dict[str, Any]]) -> None:
        mod = self.names[module.key]
        if isinstance(item, s.Connection):
            kinds["connections"][item.name.text] = trusted(m.Connection)(
                name=item.name.text,
                description=item.description.value if item.description else None,
                origin=origin(item.span),
            )
        elif isinstance(item, s.Runtime):
            kinds["runtimes"][item.name.text] = trusted(m.Runtime)(
                name=item.name.text,
                description=item.description.value if item.description else None,
                origin=origin(item.span),
            )
        elif isinstance(item, s.Fact):
            fact = item
            kinds["facts"][fact.name.text] = trusted(m.Fact)(
                name=fact.name.text,
                type=self.type(fact.type),
                description=fact.description.value if fact.description else None,
                origin=origin(fact.span),
            )
        elif isinstance(item, s.Label):
            kinds["labels"][item.name.text] = trusted(m.Label)(
                name=item.name.text,
                description=item.description.value if item.description else None,
                origin=origin(item.span),
            )
        elif isinstance(item, s.Tool):
            self.add_tool(module, item, item.name.text, None, None)
        elif isinstance(item, s.Mcp):
            server = self.mcp(module, item)
            kinds["mcp_servers"][server.id] = server
        elif isinstance(item, s.Skill):
            skill = self.skill(module, item)
            kinds["skills"][skill.name] = skill
        elif isinstance(item, s.Policy):
            self.policy(module, item)
        elif isinstance(item, s.RiskTable):
            table = self.risk_table(module, item)
            kinds["risk_tables"][table.name] = table
        elif isinstance(item, s.Agent):
            agent = self.agent(module, item)
            kinds["agents"][agent.name] = agent
        elif isinstance(item, s.Workflow):
            workflow = self.workflow(module, item)
            kinds["workflows"][workflow.name] = workflow
        elif isinstance(item, s.Test):
            test = self.test(module, item)
            kinds["tests"][f"{mod}.{item.name.value}"] = test

    # =========================================================================================
    # Wire names

    def check_wire_names(self) -> None:
        by_wire: dict[str, str] = {}
        for tool_id in sorted(self.tools, key=lambda i: self.tool_spans[i].start):
            wire = self.tools[tool_id].wire_name
            first = by_wire.get(wire)
            if first is None:
                by_wire[wire] = tool_id
                continue
            self.report(
                "H310",
                f"tools `{first}` and `{tool_id}` have the same wire name `{wire}`",
                self.tool_spans[tool_id],
                f"sent to the model as `{wire}`",
                secondary=[(self.tool_spans[first], f"`{first}` is sent as `{wire}` too")],
                help='give one of them another name with `wire_name "…"`',
            )


def lower_program(resolution: Resolution) -> Lowered:
    """Stage lower: the model of a resolved build, or None with the diagnostics that say why."""
    return _Lowerer(resolution).run()
