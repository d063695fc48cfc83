"""Stage validate: the cross-layer errors of language.md §12 over the typed model.

Runs on a build that lowered without errors. The model says what each tool is (kind, schema,
risk, packs, skill); the syntax trees, reached through the resolution, say where each use was
written, so every diagnostic underlines the text a user wrote. Checks, by layer:

- surfaces: legacy, primitive and private tools named by id (H320), MCP globs over servers the
  build does not declare (H321), `expose` selectors that select no public tool (H322);
- availability: `requires` reading `args` or `call` (H323);
- conditions: unknown fields of roots and facts (H324), incompatible operand types (H325),
  operators applied to values they do not take (H326), arguments no selected tool has (H327),
  bare names and strings that are not members of the enum beside them (H328);
- policies: ASK without approver (H329), DENY without reason (H330);
- delegation and skills: chains deeper than one (H331), private tools used outside their skill
  (H332), subagents listing tools they may not call (H333).

`delegate_task` on a surface and a grant without `ttl` never get here: resolve (H206) and the
parser (H101) reject them. Work is linear in the spec: tools are indexed by id, pack, kind,
effect, module and argument name once, each distinct selector is compiled once, and a rule's
selection is computed only when its condition reads `args`. The types of operands and the rules
that compare them are compiler/condition_types.py; the checks of session terms and
`on_success` (H337–H340, H342, H343) are compiler/validate_session.py, a mixin of the validator.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic, clipped
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import OPERATORS

from .condition_types import (
    ANY,
    BOOL,
    ROOT_TYPES,
    SHOWN_VALUES,
    Operand,
    Problem,
    Ty,
    article,
    call_type,
    describe,
    equality_problem,
    field_of,
    has_problem,
    join_types,
    object_type,
    options_of,
    order_problem,
    output_type,
    quote_values,
    schema_type,
    text_problem,
    type_of,
    unlisted_in,
)
from .lower import module_name
from .modules import head_span
from .resolve import BUILTIN_ROOTS, RESULT_ROOT, Module, Resolution
from .resolve_help import mcp_server_named, unknown_mcp_server
from .validate_session import ALL, AllTools, CondContext, Selection, SessionChecks

__all__ = ["validate_spec"]

PUBLIC_KINDS = frozenset({"public", "dynamic", "mcp"})
KIND_WORDS = {
    "legacy": "legacy tool",
    "primitive": "primitive tool",
    "private": "skill-private tool",
    "public": "public tool",
    "dynamic": "dynamic tool",
    "mcp": "MCP tool",
}


# =============================================================================================
# Selections of tools


_RISK_OPS = tuple(op for op, o in OPERATORS.items() if o.family in ("equality", "order"))
"""The operators a risk selector (`risk >= high`) may use: those that compare risk levels."""


class _Validator(SessionChecks):
    def __init__(self, spec: m.Spec, resolution: Resolution) -> None:
        self.spec = spec
        self.res = resolution
        self.diagnostics: list[Diagnostic] = []
        self.names = {mod.key: module_name(mod) for mod in resolution.modules}
        self.root = spec.root_module
        tools = spec.tools
        self.ids = sorted(tools)
        self.by_pack: dict[str, set[str]] = {}
        self.by_kind: dict[str, set[str]] = {}
        self.by_effect: dict[str, set[str]] = {}
        self.by_module: dict[str, set[str]] = {}
        self.risks: dict[str, frozenset[str]] = {}
        for tool_id, tool in tools.items():
            for pack in tool.packs:
                self.by_pack.setdefault(pack, set()).add(tool_id)
            self.by_kind.setdefault(tool.kind, set()).add(tool_id)
            for effect in tool.effects:
                self.by_effect.setdefault(effect, set()).add(tool_id)
            self.by_module.setdefault(tool.module, set()).add(tool_id)
            self.risks[tool_id] = frozenset(
                [op.risk for op in tool.operations.values()] or [tool.risk]
            )
        self._arguments: dict[str, dict[str, Ty]] | None = None
        self._results: dict[str, dict[str, Ty]] | None = None
        self.selectors: dict[tuple[object, ...], Selection] = {}
        self.argument_cache: dict[tuple[object, ...], tuple[Ty, ...]] = {}
        self.public: dict[tuple[object, ...], bool] = {}

    def shown(self, qualified: str) -> str:
        """A module-scoped name as a user of the root module writes it."""
        return qualified.removeprefix(f"{self.root}.")

    def qualified(self, module: Module, name: str) -> str:
        return f"{self.names[module.key]}.{name}"

    def symbol_name(self, name: s.Name | s.Pattern) -> str | None:
        symbol = self.res.references.get(name.span)
        if symbol is None:
            return None
        if symbol.kind in ("tool", "fact", "mcp", "connection", "runtime"):
            return symbol.name
        return self.qualified(symbol.module, symbol.name)

    # =========================================================================================
    # The program

    def run(self) -> list[Diagnostic]:
        self.profile_users = self.profiles()
        for module in self.res.modules:
            for item in module.syntax.items:
                if isinstance(item, s.Tool):
                    self.check_tool(module, item, item.name.text)
                elif isinstance(item, s.Extend):
                    for name in item.tools:
                        tool_id = self.symbol_name(name)
                        if tool_id is not None:
                            self.check_tool(module, item, tool_id)
                elif isinstance(item, s.Mcp):
                    for child in item.items:
                        if isinstance(child, s.Tool):
                            tool_id = f"mcp:{item.name.text}:tool:{child.name.text}"
                            self.check_tool(module, child, tool_id)
                elif isinstance(item, s.Skill):
                    self.check_skill(module, item)
                elif isinstance(item, s.Surface):
                    self.check_surface(module, item)
                elif isinstance(item, s.Policy):
                    self.check_policy(module, item)
                elif isinstance(item, s.RiskTable):
                    self.check_risk_table(item)
                elif isinstance(item, s.Agent):
                    self.check_agent(item)
                elif isinstance(item, s.Workflow):
                    self.check_workflow(module, item)
        return self.diagnostics

    def profiles(self) -> dict[str, set[str]]:
        """Policy → the skills whose profile is it or includes it."""
        users: dict[str, set[str]] = {}
        for skill in self.spec.skills.values():
            stack = [skill.profile] if skill.profile else []
            while stack:
                name = stack.pop()
                seen = users.setdefault(name, set())
                if skill.name in seen:
                    continue
                seen.add(skill.name)
                policy = self.spec.policies.get(name)
                if policy is not None:
                    stack.extend(policy.includes)
        return users

    # =========================================================================================
    # Selectors

    @staticmethod
    def key(selector: s.Selector, module: Module) -> tuple[object, ...]:
        if isinstance(selector, s.RiskSelector):
            return ("risk", selector.op, selector.level.text)
        if isinstance(selector, s.EffectsSelector):
            return ("effects", selector.effect.text)
        return ("pattern", selector.text, module.key)

    def select(self, selector: s.Selector, module: Module) -> Selection:
        """The tools a selector names (all kinds: policies judge every call); compiled once."""
        key = self.key(selector, module)
        found = self.selectors.get(key)
        if found is None:
            found = self.selectors[key] = self.compile(selector, module)
        return found

    def compile(self, selector: s.Selector, module: Module) -> Selection:
        if isinstance(selector, s.RiskSelector):
            level = m.risk_rank(selector.level.text)
            operator = OPERATORS.get(selector.op)
            relation = operator.relation if operator is not None else None
            return frozenset(
                t
                for t, risks in self.risks.items()
                if relation is None or any(relation(m.risk_rank(r), level) for r in risks)
            )
        if isinstance(selector, s.EffectsSelector):
            return frozenset(self.by_effect.get(selector.effect.text, ()))
        text = selector.text
        if text == "*":
            return ALL
        if text.startswith("pack:"):
            return frozenset(self.by_pack.get(text[5:], ()))
        if text.startswith("kind:"):
            return frozenset(self.by_kind.get(text[5:], ()))
        target = self.res.module_globs.get(selector.span)
        if target is not None:
            return frozenset(self.by_module.get(self.names[target.key], ()))
        if "*" in text:
            prefix = text[: text.index("*")]
            start = bisect_left(self.ids, prefix)
            end = start
            while end < len(self.ids) and self.ids[end].startswith(prefix):
                end += 1
            return frozenset(self.ids[start:end])
        name = self.symbol_name(s.Name(text, span=selector.span))
        return frozenset([name]) if name is not None and name in self.spec.tools else frozenset()

    def union(self, selectors: Iterable[s.Selector], module: Module) -> Selection:
        found: set[str] = set()
        for selector in selectors:
            selection = self.select(selector, module)
            if isinstance(selection, AllTools):
                return ALL
            found |= selection
        return frozenset(found)

    def may_miss(self, selector: s.Selector, module: Module) -> bool:
        """Whether the selector may select a tool this model lacks: one declared by a
        declaration skipped after a syntax error or set aside for its errors."""
        poison = self.res.poison
        if not poison:
            return False
        if isinstance(selector, s.Pattern):
            target = self.res.module_globs.get(selector.span)
            return poison.may_select(selector.text, target.key if target is not None else None)
        return poison.may_select("*")

    def public_in(self, selection: Selection) -> bool:
        tools = self.spec.tools
        if isinstance(selection, AllTools):
            return any(t.kind in PUBLIC_KINDS for t in tools.values())
        return any(tools[t].kind in PUBLIC_KINDS for t in selection)

    # =========================================================================================
    # Surfaces

    def check_surface(self, module: Module, node: s.Surface) -> None:
        for item in node.items:
            if isinstance(item, s.Expose):
                for pattern in item.patterns:
                    if not self.named_tool(pattern, "expose"):
                        self.check_exposed(pattern, module)
            elif isinstance(item, s.Hide):
                for pattern in item.patterns:
                    self.named_tool(pattern, "hide")

    def named_tool(self, pattern: s.Pattern, where: str) -> bool:
        """H320 for a non-public tool named by id; True when the pattern is an id."""
        symbol = self.res.references.get(pattern.span)
        if symbol is None or symbol.kind != "tool":
            return False
        tool = self.spec.tools.get(symbol.name)
        if tool is None or tool.kind in PUBLIC_KINDS:
            return True
        word = KIND_WORDS[tool.kind]
        if tool.kind == "legacy":
            if tool.replaced_by and where == "expose":
                help = f"expose its replacement `{tool.replaced_by}`"
            elif tool.replaced_by:
                help = (
                    "remove it: a legacy tool is never public, so there is nothing to hide "
                    f"(its replacement is `{tool.replaced_by}`)"
                )
            else:
                help = "remove it: a legacy tool stays registered for old sessions only"
        elif tool.kind == "primitive":
            help = "remove it: a primitive tool is called by the runtime, never by a planner"
        else:
            help = (
                f"remove it: only the subagents of skill `{self.shown(tool.skill or '')}` call it"
            )
        self.report(
            "H320",
            f"{word} `{tool.id}` cannot be named on a surface",
            pattern.span,
            f"{article(word)} {word}, never public",
            secondary=[(symbol.span, f"declared as {article(word)} {word} here")],
            help=help,
        )
        return True

    def check_exposed(self, pattern: s.Pattern, module: Module) -> None:
        text = pattern.text
        server = mcp_server_named(text) if "*" in text else None
        if server is not None and server not in self.spec.mcp_servers:
            poison = self.res.poison
            if not (poison.incomplete or poison.covers_global("mcp", server)):
                self.diagnostics.append(
                    unknown_mcp_server(server, pattern.span, self.spec.mcp_servers)
                )
                return
        selection = self.select(pattern, module)
        key = self.key(pattern, module)
        if key not in self.public:
            self.public[key] = self.public_in(selection)
        if self.public[key] or self.may_miss(pattern, module):
            return
        notes: list[str] = []
        help: str | None = None
        if text.startswith("kind:") and text[5:] not in PUBLIC_KINDS:
            help = f"{text[5:]} tools are never public; select public, dynamic or MCP tools"
        elif text.startswith("pack:"):
            packs = {
                p
                for p, ids in self.by_pack.items()
                if any(self.spec.tools[t].kind in PUBLIC_KINDS for t in ids)
            }
            help = did_you_mean(text[5:], sorted(packs))
        if isinstance(selection, frozenset) and selection and not text.startswith("kind:"):
            hidden = sorted(selection)
            notes.append(
                "it matches only tools that are never public: "
                + ", ".join(f"`{t}` ({self.spec.tools[t].kind})" for t in hidden[:SHOWN_VALUES])
                + (" and more" if len(hidden) > SHOWN_VALUES else "")
            )
        self.report(
            "H322",
            f"`{text}` selects no public tool",
            pattern.span,
            "matches no public tool",
            notes=notes,
            help=help or "check the pattern, or remove it",
        )

    # =========================================================================================
    # Tools and availability

    def check_tool(self, module: Module, node: s.Tool | s.Extend, tool_id: str) -> None:
        for item in node.items:
            if isinstance(item, s.Requires):
                self.check_cond(item.cond, CondContext(module, "requires"))
            elif isinstance(item, s.OnSuccess):
                self.check_on_success(item, self.spec.tools.get(tool_id), module)

    # =========================================================================================
    # Policies and risk tables

    def check_policy(self, module: Module, node: s.Policy) -> None:
        qualified = self.qualified(module, node.name.text)
        users = self.profile_users.get(qualified, set())
        for item in node.items:
            if isinstance(item, s.Default):
                if item.effect == "ask" and not _has_approver(item.options):
                    self.report(
                        "H329",
                        f"`default ask` of policy `{node.name.text}` names no approver",
                        head_span(item),
                        "asks nobody",
                        help='add `{ approver role "…" }`: someone must be able to approve',
                    )
            elif isinstance(item, s.Rule):
                self.check_rule(module, node, item, users)

    def check_rule(self, module: Module, policy: s.Policy, rule: s.Rule, users: set[str]) -> None:
        head = Span(
            rule.span.source,
            rule.span.start,
            max(sel.span.end for sel in rule.selectors) if rule.selectors else rule.span.end,
        )
        label = (
            f"`{policy.name.text}.{rule.label.text}`"
            if rule.label is not None
            else f"in policy `{policy.name.text}`"
        )
        if rule.effect == "ask" and not _has_approver(rule.options):
            self.report(
                "H329",
                f"`ask` rule {label} names no approver",
                head,
                "asks nobody",
                help='add `{ approver role "…" }` (or `approver user "…"`) to the rule',
            )
        if rule.effect == "deny" and not _has_option(rule.options, "reason"):
            self.report(
                "H330",
                f"`deny` rule {label} gives no reason",
                head,
                "no `reason`",
                help='add `{ reason "…" }`: the agent and the trace are told why the call was '
                "refused",
            )
        for selector in rule.selectors:
            if isinstance(selector, s.Pattern):
                self.private_in_profile(selector, users, policy)
            elif isinstance(selector, s.RiskSelector):
                self.check_risk_selector(selector)
        if rule.when is not None:
            self.check_cond(rule.when, CondContext(module, "rule", rule.selectors))
        for option in rule.options or ():
            if not isinstance(option, s.Grant):
                continue
            grant = option
            if grant.selector is not None:
                self.private_in_profile(grant.selector, users, policy)
            if grant.when is None:
                continue
            if grant.selector is not None:
                context = CondContext(module, "grant", (grant.selector,), what="grant")
            else:
                context = CondContext(module, "grant", rule.selectors)
            self.check_cond(grant.when, context)

    def check_risk_selector(self, selector: s.RiskSelector) -> None:
        """H334 for `risk OP level` with an operator that is neither an equality nor an order."""
        if selector.op in _RISK_OPS:
            return
        *others, last = (f"`{op}`" for op in _RISK_OPS)
        self.report(
            "H334",
            f"a risk selector cannot compare with `{selector.op}`",
            selector.span,
            "selects no tool",
            help=f"compare risk levels with {', '.join(others)} or {last}, as in "
            f"`risk >= {selector.level.text}`",
        )

    def private_in_profile(self, pattern: s.Pattern, users: set[str], policy: s.Policy) -> None:
        """H332 for another skill's private tool named in a skill's profile."""
        if not users:
            return
        tool = self.named_private(pattern)
        if tool is None or tool.skill in users:
            return
        other = sorted(users)[0]
        self.report(
            "H332",
            f"`{tool.id}` is private to skill `{self.shown(tool.skill or '')}`",
            pattern.span,
            f"named in policy `{policy.name.text}`, the profile of skill `{self.shown(other)}`",
            help="a private tool is called only inside its own skill; judge it in that skill's "
            "profile",
        )

    def named_private(self, name: s.Name | s.Pattern) -> m.Tool | None:
        symbol = self.res.references.get(name.span)
        if symbol is None or symbol.kind != "tool":
            return None
        tool = self.spec.tools.get(symbol.name)
        return tool if tool is not None and tool.kind == "private" else None

    def check_risk_table(self, node: s.RiskTable) -> None:
        for entry in node.entries:
            level = entry.level.text
            if entry.effect == "ask" and not _has_approver(entry.options):
                self.report(
                    "H329",
                    f"`{level} ask` of risk table `{node.name.text}` names no approver",
                    head_span(entry),
                    "asks nobody",
                    help='add `{ approver role "…" }` to the entry',
                )
            if entry.effect == "deny" and not _has_option(entry.options, "reason"):
                self.report(
                    "H330",
                    f"`{level} deny` of risk table `{node.name.text}` gives no reason",
                    head_span(entry),
                    "no `reason`",
                    help='add `{ reason "…" }`: the agent and the trace are told why the call '
                    "was refused",
                )

    # =========================================================================================
    # Agents, skills, workflows

    def agent_node(self, name: s.Name) -> tuple[str, s.Agent] | None:
        symbol = self.res.references.get(name.span)
        if symbol is None or symbol.kind != "agent" or not isinstance(symbol.node, s.Agent):
            return None
        return self.qualified(symbol.module, symbol.name), symbol.node

    def delegation(self, target: s.Name) -> tuple[str, s.Name] | None:
        """When `target` is an agent that delegates itself: its name and its first target."""
        found = self.agent_node(target)
        if found is None:
            return None
        qualified, node = found
        for attr in node.items:
            if attr.key == "delegate":
                names = [v for v in attr.values if isinstance(v, s.Name)]
                if names:
                    return qualified, names[0]
        return None

    def check_agent(self, node: s.Agent) -> None:
        for attr in node.items:
            if attr.key != "delegate":
                continue
            for target in (v for v in attr.values if isinstance(v, s.Name)):
                deeper = self.delegation(target)
                if deeper is None:
                    continue
                _, next_name = deeper
                self.report(
                    "H331",
                    f"delegation chain `{node.name.text}` → `{target.text}` → "
                    f"`{next_name.text}` is deeper than one level",
                    target.span,
                    f"`{target.text}` delegates too",
                    secondary=[(next_name.span, f"`{target.text}` delegates to here")],
                    help=f"remove `delegate` from agent `{target.text}`, or let "
                    f"`{node.name.text}` delegate to an agent that does not delegate",
                )

    def check_skill(self, module: Module, node: s.Skill) -> None:
        qualified = self.qualified(module, node.name.text)
        for item in node.items:
            if isinstance(item, s.PrivateTool):
                self.check_tool(module, item.tool, item.tool.name.text)
            elif isinstance(item, s.Subagent):
                for attr in item.items:
                    if attr.key != "tools":
                        continue
                    for name in (v for v in attr.values if isinstance(v, s.Name)):
                        self.check_subagent_tool(qualified, node, item, name)

    def check_subagent_tool(self, skill: str, node: s.Skill, sub: s.Subagent, name: s.Name) -> None:
        symbol = self.res.references.get(name.span)
        if symbol is None or symbol.kind != "tool":
            return
        tool = self.spec.tools.get(symbol.name)
        if tool is None or tool.kind in PUBLIC_KINDS or tool.skill == skill:
            return
        where = f"listed by subagent `{sub.name.text}` of skill `{node.name.text}`"
        if tool.kind == "private":
            self.report(
                "H332",
                f"`{tool.id}` is private to skill `{self.shown(tool.skill or '')}`",
                name.span,
                where,
                secondary=[(symbol.span, "declared private here")],
                help="a private tool is called only by the subagents of its own skill",
            )
            return
        word = KIND_WORDS[tool.kind]
        self.report(
            "H333",
            f"subagent `{sub.name.text}` lists {word} `{tool.id}`",
            name.span,
            f"neither private to skill `{node.name.text}` nor public",
            secondary=[(symbol.span, f"declared as {article(word)} {word} here")],
            help=f"list its replacement `{tool.replaced_by}`"
            if tool.kind == "legacy" and tool.replaced_by
            else "a subagent calls its skill's private tools and public tools; remove it",
        )

    def check_workflow(self, module: Module, node: s.Workflow) -> None:
        workflow = self.spec.workflows.get(self.qualified(module, node.name.text))
        steps = {st.name: st for st in workflow.steps} if workflow is not None else {}
        context = CondContext(
            module, "workflow", steps=steps, input=workflow.input if workflow else None
        )
        for step in node.items:
            if not isinstance(step, s.Step):
                continue
            action = step.action
            if isinstance(action, s.CallAction):
                tool = self.named_private(action.tool)
                if tool is not None:
                    self.report(
                        "H332",
                        f"`{tool.id}` is private to skill `{self.shown(tool.skill or '')}`",
                        action.tool.span,
                        f"called by workflow `{node.name.text}`",
                        help="a workflow calls public tools; a private tool is called only "
                        "inside its own skill",
                    )
            elif isinstance(action, s.DelegateAction):
                deeper = self.delegation(action.agent)
                if deeper is None:
                    self.check_delegate_step(workflow, action)
                else:
                    _, next_name = deeper
                    self.report(
                        "H331",
                        f"delegation chain `{node.name.text}.{step.name.text}` → "
                        f"`{action.agent.text}` → `{next_name.text}` is deeper than one level",
                        action.agent.span,
                        f"`{action.agent.text}` delegates too",
                        secondary=[(next_name.span, f"`{action.agent.text}` delegates to here")],
                        help=f"delegate to an agent that does not delegate, or remove "
                        f"`delegate` from agent `{action.agent.text}`",
                    )
            elif isinstance(action, s.GateAction):
                self.check_cond(action.cond, context)
            if step.when is not None:
                self.check_cond(step.when, context)

    def check_delegate_step(self, workflow: m.Workflow | None, action: s.DelegateAction) -> None:
        """H344: a `delegate` step of a workflow run as an agent that may not delegate to the
        step's agent (the runtime would refuse it, runtime/session/_delegation.py)."""
        if workflow is None or workflow.agent is None:
            return  # judged by a policy, the workflow delegates to the agents its steps name
        agent = self.spec.agents.get(workflow.agent)
        target = self.agent_node(action.agent)
        if agent is None or target is None or target[0] in agent.delegates:
            return
        shown = self.shown(workflow.agent)
        delegates = ", ".join(f"`{self.shown(a)}`" for a in agent.delegates)
        self.report(
            "H344",
            f"agent `{shown}` does not delegate to `{action.agent.text}`",
            action.agent.span,
            f"the workflow runs as `{shown}`, "
            + (f"which delegates to {delegates}" if delegates else "which does not delegate"),
            help=f"add `delegate {action.agent.text}` to agent `{shown}`, or judge the workflow "
            "by a `policy` instead of an `agent`",
        )

    # =========================================================================================
    # Conditions

    def check_cond(self, cond: object, ctx: CondContext) -> None:
        if isinstance(cond, s.And | s.Or):
            for item in cond.items:
                self.check_cond(item, ctx)
        elif isinstance(cond, s.Not):
            self.check_cond(cond.item, ctx)
        elif isinstance(cond, s.Compare):
            self.check_compare(cond, ctx)
        elif isinstance(cond, s.Provenance):
            self.check_provenance(cond, ctx)
        elif isinstance(cond, s.Quantified):
            self.check_quantified(cond, ctx)
        else:
            operand = self.operand(cond, ctx)
            if operand is None:
                return
            ty = operand.ty
            if ty.name in ("bool", "any") or (
                ty.name == "union" and any(o.name in ("bool", "any") for o in ty.options)
            ):
                return
            self.report(
                "H325",
                f"`{operand.text}` is {describe(ty)}, not a condition",
                operand.span,
                "not true or false",
                help="compare it with a value, such as `… == …`",
            )

    def operand(self, node: object, ctx: CondContext) -> Operand | None:
        span: Span = node.span  # type: ignore[attr-defined]
        ty: Ty | None
        if isinstance(node, s.Str):
            ty = Ty("string", lit=node.value)
        elif isinstance(node, s.Int):
            ty = Ty("int")
        elif isinstance(node, s.Float):
            ty = Ty("float")
        elif isinstance(node, s.Duration):
            ty = Ty("duration")
        elif isinstance(node, s.Bool):
            ty = BOOL
        elif isinstance(node, s.FuncCall):
            ty = self.call_type(node, ctx)
        elif isinstance(node, s.Path):
            ty = self.path_type(node, ctx)
        elif isinstance(node, s.Index):
            ty = self.index_type(node, ctx)
        elif isinstance(node, s.ListLit):
            items = [self.operand(i, ctx) for i in node.items]
            if any(i is None for i in items):
                return None
            ty = Ty("list", item=join_types([i.ty for i in items if i is not None]))
        else:
            ty = ANY
        if ty is None:
            return None
        return Operand(node, ty, span, clipped(span.text))

    def index_type(self, node: s.Index, ctx: CondContext) -> Ty | None:
        """`MAP[KEY]`: the map's item type; H352 when the value is not a map or the key is not
        a text (None after an error)."""
        of, key = self.operand(node.of, ctx), self.operand(node.key, ctx)
        if of is None or key is None:
            return None
        if of.ty.name == "any":
            return ANY
        if of.ty.name != "map":
            self.report(
                "H352",
                f"`{of.text}[…]` reads an entry of a map, but `{of.text}` is {describe(of.ty)}",
                of.span,
                f"{describe(of.ty)}",
                help="index a map (`fact f: map<…>`); a list is asked with `in`, a record's "
                "field is read with a dot",
            )
            return None
        if key.ty.name not in ("string", "any", "bare") and not (
            key.ty.name == "union" and any(o.name in ("string", "any") for o in key.ty.options)
        ):
            self.report(
                "H352",
                f"the key `{key.text}` of `{of.text}[…]` is {describe(key.ty)}, not a text",
                key.span,
                f"{describe(key.ty)}",
                help="a map's entries are named by texts: key it by a `string`",
            )
            return None
        return of.ty.item or ANY

    # -- paths ---------------------------------------------------------------------------------

    def path_type(self, node: s.Path, ctx: CondContext) -> Ty | None:
        """The type of a path, or None after reporting why it cannot be read."""
        parts = node.parts
        root = parts[0]
        if root in BUILTIN_ROOTS:
            if root in ("args", "call") and ctx.kind == "requires":
                self.report(
                    "H323",
                    f"`requires` reads `{node.text}`, but availability is decided before any "
                    "call exists",
                    node.span,
                    f"no `{root}` yet",
                    help="availability may read facts, `actor`, `task`, `env`, `tool` and fact "
                    "functions; test a call's "
                    + ("arguments" if root == "args" else "execution parameters")
                    + " in a policy rule instead",
                )
                return None
            if root == "args":
                if ctx.call is not None:  # an `on_success` reads its own call's
                    return self.navigate(call_type(ctx.call.input), parts, 1, node)
                if ctx.selectors is None:
                    return ANY
                if len(parts) == 1:
                    return object_type({}, open=True)
                ty = self.argument(parts[1], node, ctx)
                return None if ty is None else self.navigate(ty, parts, 2, node)
            return self.navigate(ROOT_TYPES.get(root, ANY), parts, 1, node)
        symbol = self.res.references.get(node.span)
        if symbol is not None and symbol.kind == "var":
            return self.navigate(ctx.vars.get(symbol.name, ANY), parts, 1, node)
        if root == RESULT_ROOT and len(parts) > 1:
            if ctx.call is not None:
                return self.navigate(call_type(ctx.call.output), parts, 1, node)
            if ctx.results is None:
                return ANY  # `on_success` and misplaced reads are checked elsewhere
            ty = self.result_field(parts[1], node, ctx)
            return None if ty is None else self.navigate(ty, parts, 2, node)
        if node.span in self.res.whole_results and ctx.results is not None:
            # the whole result (`any x in result: …` over an `output list<…>`)
            return self.whole_result(ctx)
        if symbol is not None and symbol.kind == "fact":
            fact = self.spec.facts.get(symbol.name)
            if fact is None:
                return ANY
            depth = symbol.name.count(".") + 1
            return self.navigate(type_of(fact.type), parts, depth, node)
        if symbol is not None and symbol.kind == "step":
            step = ctx.steps.get(symbol.name)
            return self.navigate(self.step_type(step), parts, 1, node, strict=False)
        if root == "input" and ctx.kind == "workflow" and len(parts) > 1:
            return self.navigate(schema_type(ctx.input), parts, 1, node, strict=False)
        return Ty("bare", lit=node.text)

    def step_type(self, step: m.Step | None) -> Ty:
        if step is None:
            return ANY
        if step.kind == "decide":
            # its options are checked with the workflow graph (H405)
            return ANY
        if step.kind == "call":
            tool = self.spec.tools.get(step.tool or "")
            output = tool.output if tool is not None else None
            if tool is not None and output is not None and (output.open or output.shape):
                return output_type(tool)  # a read of its unlisted part gets H354
            return schema_type(output)
        if step.kind == "delegate":
            return schema_type(step.output)
        return ANY

    def navigate(
        self, ty: Ty, parts: tuple[str, ...], start: int, node: s.Path, strict: bool = True
    ) -> Ty | None:
        """Read `parts[start:]` inside `ty`; H324 when a part is not there."""
        for index in range(start, len(parts)):
            name = parts[index]
            found = field_of(ty, name)
            if found is not None:
                opened = unlisted_in(ty, name) if ty.unlisted or ty.name == "union" else None
                if opened is not None:
                    self.unlisted_read(node, index, opened)
                ty = found
                continue
            if not strict:
                return ANY
            owner = ".".join(parts[:index])
            if ty.name == "object" or (ty.name == "union" and ty.options):
                fields = [k for k, _ in ty.fields] or [k for o in ty.options for k, _ in o.fields]
                self.report(
                    "H324",
                    f"`{owner}` has no field `{name}`",
                    node.span,
                    f"not a field of `{owner}`",
                    notes=[f"its fields are {quote_values(sorted(set(fields)))}"] if fields else [],
                    help=did_you_mean(name, fields),
                )
            else:
                self.report(
                    "H324",
                    f"`{owner}` is {describe(ty)} and has no field `{name}`",
                    node.span,
                    f"{describe(ty)} has no fields",
                    help=f"read `{owner}` itself",
                )
            return None
        return ty

    # -- arguments -----------------------------------------------------------------------------

    def arguments(self) -> dict[str, dict[str, Ty]]:
        """Argument name → tool id → its type; built on the first read of `args`."""
        if self._arguments is None:
            index: dict[str, dict[str, Ty]] = {}
            for tool_id, tool in self.spec.tools.items():
                for f in tool.input.fields:
                    owner = f"a value of `args.{f.name}`"
                    index.setdefault(f.name, {})[tool_id] = type_of(f.type, owner)
            self._arguments = index
        return self._arguments

    def argument_types(self, selector: s.Selector, module: Module, name: str) -> tuple[Ty, ...]:
        """The types of argument `name` among a selector's tools; once per selector and name."""
        key = (self.key(selector, module), name)
        found = self.argument_cache.get(key)
        if found is not None:
            return found
        selection = self.select(selector, module)
        having = self.arguments().get(name, {})
        if isinstance(selection, AllTools):
            types = list(having.values())
        elif len(selection) < len(having):
            types = [having[t] for t in sorted(selection) if t in having]
        else:
            types = [ty for t, ty in having.items() if t in selection]
        found = self.argument_cache[key] = tuple(dict.fromkeys(types))
        return found

    def argument(self, name: str, node: s.Path | None, ctx: CondContext, span: Span | None = None):
        """The type of argument `name` over the selected tools, or None after H327."""
        assert ctx.selectors is not None
        types: list[Ty] = []
        for selector in ctx.selectors:
            types.extend(self.argument_types(selector, ctx.module, name))
        if types:
            return join_types(types)
        # only on an error: the selection itself, for the label and the suggestion
        selection = self.union(ctx.selectors, ctx.module)
        if not self.spec.tools or (isinstance(selection, frozenset) and not selection):
            return ANY
        if any(self.may_miss(selector, ctx.module) for selector in ctx.selectors):
            return ANY  # the argument may be one of a tool this model lacks
        where = span or (node.span if node is not None else None)
        assert where is not None
        if isinstance(selection, AllTools):
            candidates: Iterable[str] = self.arguments()
            label = "no tool has this argument"
        else:
            candidates = {f.name for t in selection for f in self.spec.tools[t].input.fields}
            label = (
                f"not an argument of `{next(iter(selection))}`"
                if len(selection) == 1
                else f"not an argument of any of the {len(selection)} selected tools"
            )
        self.report(
            "H327",
            f"no tool selected by this {ctx.what} has an argument `{name}`",
            where,
            label,
            help=did_you_mean(name, sorted(candidates)),
        )
        return None

    # -- comparisons ---------------------------------------------------------------------------

    def check_compare(self, node: s.Compare, ctx: CondContext) -> None:
        if OPERATORS[node.op].family == "has":
            self.check_has(node, ctx)
            return
        if (
            node.op == "within"
            and isinstance(node.left, s.FuncCall)
            and isinstance(node.right, s.Duration)
        ):
            # `called(t) within 1h`: a history term's window, written after its call
            call, window = node.left, node.right
            self.report(
                "H326",
                f"the window of `{call.name.text}(…)` goes inside the call",
                window.span,
                "outside the call",
                help=f"write `{call.name.text}(… within {window.text})`: `within` after a "
                "value compares paths",
            )
            return
        left = self.operand(node.left, ctx)
        right = self.operand(node.right, ctx)
        if left is None or right is None:
            return
        operator = OPERATORS[node.op]
        if operator.family == "member":
            self.check_in(node, left, right, ctx)
            return
        problems: list[Problem] = []
        for lt in options_of(left.ty):
            for rt in options_of(right.ty):
                a = Operand(left.node, lt, left.span, left.text)
                b = Operand(right.node, rt, right.span, right.text)
                if operator.family == "equality":
                    found = equality_problem(a, b, node)
                elif operator.family == "order":
                    found = order_problem(operator, a, b, node)
                else:
                    found = text_problem(operator, a, b, node)
                if found is None:
                    return
                problems.append(found)
        if problems:
            self.emit(problems[0])

    def emit(self, problem: Problem) -> None:
        self.report(problem.code, problem.message, problem.span, problem.label, help=problem.help)

    def check_in(self, node: s.Compare, left: Operand, right: Operand, ctx: CondContext) -> None:
        rights = options_of(right.ty)
        if not any(r.name in ("list", "set", "any") for r in rights):
            self.report(
                "H326",
                f"the right side of `in` is {describe(right.ty)}, not a list",
                right.span,
                "not a list",
                help='write a list, such as `["a", "b"]`, or compare with `==`',
            )
            return
        if isinstance(right.node, s.ListLit):
            for item in right.node.items:
                item_operand = self.operand(item, ctx)
                if item_operand is None:
                    continue
                problems = []
                for lt in options_of(left.ty):
                    a = Operand(left.node, lt, left.span, left.text)
                    found = equality_problem(a, item_operand, node)
                    if found is None:
                        break
                    problems.append(found)
                else:
                    if problems:
                        self.emit(problems[0])
            return
        items = [r.item or ANY for r in rights if r.name in ("list", "set")]
        joined = join_types(items) if items else ANY
        problems = []
        for lt in options_of(left.ty):
            for it in options_of(joined):
                a = Operand(left.node, lt, left.span, left.text)
                b = Operand(right.node, it, right.span, right.text)
                found = equality_problem(a, b, node)
                if found is None:
                    return
                problems.append(found)
        if problems:
            self.emit(problems[0])

    def check_has(self, node: s.Compare, ctx: CondContext) -> None:
        left_node = node.left
        right = node.right
        name = (
            right.text
            if isinstance(right, s.Path)
            else right.value
            if isinstance(right, s.Str)
            else None
        )
        if isinstance(left_node, s.Path) and left_node.text == "args":
            if ctx.kind == "requires":
                self.path_type(left_node, ctx)
            elif ctx.selectors is not None and name is not None:
                self.argument(name, None, ctx, span=right.span)  # type: ignore[union-attr]
            return
        left = self.operand(left_node, ctx)
        if left is None:
            return
        problems: list[Problem] = []
        for lt in options_of(left.ty):
            found = has_problem(lt, left, right, name)
            if found is None:
                return
            problems.append(found)
        if problems:
            self.emit(problems[0])


# =============================================================================================
# Options of rules


def _has_option(options: Sequence[object] | None, key: str) -> bool:
    return any(isinstance(o, s.Attr) and o.key == key for o in options or ())


def _has_approver(options: Sequence[object] | None) -> bool:
    return any(isinstance(o, s.Approver) for o in options or ())


def validate_spec(spec: m.Spec, resolution: Resolution) -> list[Diagnostic]:
    """Errors across layers: surfaces, availability, conditions, policies, delegation, skills."""
    return _Validator(spec, resolution).run()
