"""Lowering policies and risk tables: rules, defaults, ASK/DENY options, grants and includes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted

from ..modules import head_span
from ..resolve import Module
from .conditions import ConditionLowering
from .core import article, origin

SELF_APPROVAL = ("allow", "deny")
ASK_ONLY = {
    "approver": "approvers",
    "grant": "grants",
    "self_approval": "a `self_approval`",
    "expires": "an `expires`",
}
"""The options only an ASK may carry, and how the H309 label names them."""


class PolicyLowering(ConditionLowering):
    """Policies, their rules and includes, and risk tables."""

    def options(
        self, options: Sequence[object] | None, effect: str, where: str, effect_span: Span
    ) -> dict[str, Any]:
        """Approvers, grant, expires, self_approval, reason and instead of a rule, a default or
        a risk-table entry."""
        approvers: list[m.Approver] = []
        grant: m.Grant | None = None
        seen: dict[str, Any] = {}
        for option in options or ():
            asking = isinstance(option, s.Approver | s.Grant) or (
                isinstance(option, s.Attr) and option.key in ASK_ONLY
            )
            if asking and effect != "ask" and isinstance(option, s.Approver | s.Grant | s.Attr):
                key = (
                    "approver"
                    if isinstance(option, s.Approver)
                    else "grant"
                    if isinstance(option, s.Grant)
                    else option.key
                )
                what = ASK_ONLY.get(key, key)
                self.report(
                    "H309",
                    f"`{key}` on {article(effect)} `{effect}` {where}",
                    option.span,
                    f"only an `ask` has {what}",
                    secondary=[(effect_span, f"this {where} is `{effect}`")],
                    help=f"make the {where} `ask`, or remove the `{key}`",
                )
                continue
            if isinstance(option, s.Approver):
                approvers.append(trusted(m.Approver)(kind=option.kind, value=option.value.value))  # type: ignore[arg-type]
            elif isinstance(option, s.Grant):
                if self.once(seen, "grant", option, option.span):
                    grant = self.grant(option)
            elif isinstance(option, s.Attr):
                self.once(seen, option.key, option, option.span)
        self_approval = None
        chosen = seen.get("self_approval")
        if chosen is not None and chosen.values and isinstance(chosen.values[0], s.Name):
            self_approval = self.word(chosen.values[0], SELF_APPROVAL, "`self_approval` choice")
        expires_ms = None
        chosen = seen.get("expires")
        if chosen is not None and chosen.values and isinstance(chosen.values[0], s.Duration):
            expires_ms = self.positive_ms(chosen.values[0], "an ASK's `expires`")
        return {
            "approvers": tuple(approvers),
            "grant": grant,
            "expires_ms": expires_ms,
            "reason": self.text(seen.get("reason")),
            "instead": self.text(seen.get("instead")),
            "self_approval": self_approval,
        }

    def grant(self, node: s.Grant) -> m.Grant:
        ttl = self.positive_ms(node.ttl, "a grant's `ttl`")
        module = self.current
        return trusted(m.Grant)(
            scope=node.scope,  # type: ignore[arg-type]
            ttl_ms=ttl,
            selector=self.selector(node.selector, module) if node.selector else None,
            condition=self.cond(node.when, module) if node.when is not None else None,
        )

    def policy(self, module: Module, node: s.Policy) -> None:
        self.current = module
        qualified = f"{self.names[module.key]}.{node.name.text}"
        attrs = self.unique_attrs(node.items, ("summary",), "a policy")
        default: m.DefaultDecision | None = None
        first_default: s.Default | None = None
        parts: list[m.Rule | tuple[str, Span]] = []
        includes: list[str] = []
        position = 0
        for item in node.items:
            if isinstance(item, s.Default):
                if first_default is not None:
                    self.once({"default": first_default}, "default", item, item.span)
                    continue
                first_default = item
                default = self.default_decision(module, item)
            elif isinstance(item, s.Include):
                target = self.ref(item.policy, module)
                includes.append(target)
                parts.append((target, item.span))
            elif isinstance(item, s.Rule):
                position += 1
                parts.append(self.rule(module, node, item, position, qualified))
        shell = trusted(m.Policy)(
            name=qualified,
            summary=self.text(attrs.get("summary")),
            default=default,
            includes=tuple(includes),
            origin=origin(node.name.span),
        )
        self.policy_parts[qualified] = (node, shell, parts)

    def default_decision(self, module: Module, node: s.Default) -> m.DefaultDecision:
        span = head_span(node)
        if node.table is not None:
            opts = self.options(node.options, "table", "default", span)
            return trusted(m.DefaultDecision)(
                table=self.ref(node.table, module), origin=origin(node.span), **opts
            )
        effect = node.effect or "deny"
        opts = self.options(node.options, effect, "default", span)
        return trusted(m.DefaultDecision)(effect=effect, origin=origin(node.span), **opts)  # type: ignore[arg-type]

    def rule(
        self, module: Module, policy: s.Policy, node: s.Rule, position: int, qualified: str
    ) -> m.Rule:
        label = (
            f"{policy.name.text}.{node.label.text}"
            if node.label is not None
            else f"{policy.name.text}#{position}"
        )
        selectors: list[m.Selector] = []
        for sel in node.selectors:
            if isinstance(sel, s.Pattern):
                selectors.append(self.selector(sel, module))
            elif isinstance(sel, s.RiskSelector):
                level = self.word(sel.level, m.RISK_LEVELS, "risk level") or sel.level.text
                selectors.append(
                    trusted(m.Selector)(kind="risk", op=sel.op, value=level, text=sel.span.text)
                )
            else:
                effect = self.word(sel.effect, m.EFFECTS, "effect") or sel.effect.text
                selectors.append(
                    trusted(m.Selector)(kind="effects", value=effect, text=sel.span.text)
                )
        opts = self.options(node.options, node.effect, "rule", node.effect_span)
        return trusted(m.Rule)(
            label=label,
            policy=qualified,
            effect=node.effect,  # type: ignore[arg-type]
            selectors=tuple(selectors),
            condition=self.cond(node.when, module) if node.when is not None else None,
            origin=origin(node.span),
            **opts,
        )

    def expand(self, name: str, stack: list[str]) -> m.Policy:
        _, shell, parts = self.policy_parts[name]
        rules: list[m.Rule] = []
        stack = [*stack, name]
        for part in parts:
            if isinstance(part, m.Rule):
                rules.append(part)
                continue
            target, span = part
            if target in stack:
                cycle = [*stack[stack.index(target) :], target]
                if frozenset(cycle) in self.cycles:
                    continue
                self.cycles.add(frozenset(cycle))
                root = f"{self.names[self.root.key]}." if self.root is not None else "\0"
                cycle = [n.removeprefix(root) for n in cycle]
                self.report(
                    "H311",
                    f"include cycle `{' → '.join(cycle)}`",
                    span,
                    "this include closes the cycle",
                    help="move the shared rules into a policy that both include",
                )
                continue
            if target in self.policy_parts:
                rules.extend(self.expand(target, stack).rules)
        return shell.model_copy(update={"rules": tuple(rules)})

    def risk_table(self, module: Module, node: s.RiskTable) -> m.RiskTable:
        self.current = module
        entries: dict[m.Risk, m.RiskEntry] = {}
        seen: dict[str, s.RiskEntry] = {}
        unknown = False
        for entry in node.entries:
            # a word of m.RISK_LEVELS, or None
            level = cast("m.Risk | None", self.word(entry.level, m.RISK_LEVELS, "risk level"))
            if level is None:
                unknown = True
                continue
            first = seen.get(level)
            if first is not None:
                self.report(
                    "H302",
                    f"risk level `{level}` is given twice",
                    entry.level.span,
                    "given again here",
                    secondary=[(first.level.span, "first given here")],
                    help="keep one entry per level",
                )
                continue
            seen[level] = entry
            span = head_span(entry)
            opts = self.options(entry.options, entry.effect, "entry", span)
            entries[level] = trusted(m.RiskEntry)(
                effect=entry.effect,  # type: ignore[arg-type]
                origin=origin(entry.span),
                **opts,
            )
        absent = [lvl for lvl in m.RISK_LEVELS if lvl not in entries]
        if absent and not unknown:
            shown = ", ".join(f"`{a}`" for a in absent)
            self.missing(
                f"entry for {shown}",
                node,
                f"risk table `{node.name.text}`",
                help="map every level `low medium high critical` to an effect",
            )
        return trusted(m.RiskTable)(
            name=f"{self.names[module.key]}.{node.name.text}",
            entries=dict(sorted(entries.items(), key=lambda kv: m.risk_rank(kv[0]))),
            origin=origin(node.name.span),
        )
