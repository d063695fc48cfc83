"""The package's review docs (`docs/*.md`): one page per part of the spec, as typed blocks.

Every string of a block is already escaped (`escape.py`); `render.py` prints the pages with
the template `doc.md.j2`. The policy page shows, per policy and tool, the Python the runtime
compiles from `model.json` when it loads it, taken from the runtime (`Decider.source`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harnessc.runtime.judge.policy import PolicyEngine
from harnessc.runtime.model import (
    BUILTIN_LABELS,
    RISK_LEVELS,
    Approver,
    Extract,
    Field,
    Grant,
    Policy,
    Spec,
    Step,
    Tool,
)
from harnessc.runtime.model.semantics import surface_tools

from ..analysis.concrete import session_terms
from ..lower.workflows import steps_read
from ..suppress import Suppression
from .escape import md_code, md_text, mermaid_label, py_literal, where
from .spec_text import condition_words, duration_text, spec_text, update_text

__all__ = [
    "DOC_PAGES",
    "Block",
    "DocContext",
    "Table",
    "doc_index",
    "doc_pages",
    "session_rows",
    "workflow_diagram",
]


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Block:
    """A piece of a Markdown page: a heading (`level`), a paragraph, a bullet list, a table,
    a Mermaid diagram or a fenced code block (`text` its language, `items` its lines). Every
    string in it is already escaped; a code block holds no spec text (see `doc_policies`)."""

    kind: str
    text: str = ""
    level: int = 2
    items: tuple[str, ...] = ()
    table: Table | None = None


@dataclass(frozen=True)
class DocContext:
    header: str
    title: str
    blocks: tuple[Block, ...]


# ---------------------------------------------------------------------------------------------
# Policies


def _candidates(engine: PolicyEngine, policy: Policy) -> dict[str, dict[int, Any]]:
    """tool id → rule index → True (selected for every call) or the dynamic selectors that
    select some of its calls; built per selector, like the engine's buckets."""
    slots: dict[str, dict[int, Any]] = {}
    for i, rule in enumerate(policy.rules):
        for selector in rule.selectors:
            for tool_id, answer in engine.selected(selector):
                slot = slots.setdefault(tool_id, {})
                if slot.get(i) is True:
                    continue
                if answer is True:
                    slot[i] = True
                else:
                    slot.setdefault(i, []).append(selector)
    return slots


# ---------------------------------------------------------------------------------------------
# Docs


def approvers_text(approvers: Iterable[Approver]) -> str:
    return ", ".join(f"{a.kind} {md_code(a.value)}" for a in approvers)


def grant_text(grant: Grant | None, *, scope_as_code: bool = False) -> str:
    if grant is None:
        return ""
    scope = f"`{grant.scope}`" if scope_as_code else grant.scope
    text = f"{scope}, ttl {duration_text(grant.ttl_ms)}"
    if grant.selector is not None:
        text += f", for {md_code(grant.selector.text or grant.selector.value)}"
    if grant.condition is not None:
        text += f" when {md_code(spec_text(grant.condition))}"
    return text


def expires_text(expires_ms: int | None) -> str:
    """How long an ASK's request waits for an answer (`expires`)."""
    return "never" if expires_ms is None else duration_text(expires_ms)


def codes_text(values: Iterable[str]) -> str:
    return ", ".join(md_code(v) for v in values)


def _reversible(tool: Tool) -> str:
    if "reversible" in tool.effects:
        return "yes"
    if {"write", "external"} & set(tool.effects):
        return "no"
    return "no side effects" if tool.effects else "not declared"


def _availability(tool: Tool) -> str:
    parts = []
    if tool.kind == "mcp" and tool.mcp_server:
        parts.append(
            f"MCP server {md_code(tool.mcp_server)} connected and given to agents, and the "
            "tool discovered with the declared schema"
        )
    if tool.kind == "dynamic" and tool.provided_by:
        parts.append(f"registered by {md_code(tool.provided_by)} while it runs")
    if tool.requires is not None:
        parts.append(condition_words(tool.requires))
    return "; ".join(parts) if parts else "always"


def _page(header: str, title: str, blocks: list[Block]) -> DocContext:
    return DocContext(header, title, tuple(blocks))


def _heading(text: str, level: int = 2) -> Block:
    return Block("heading", text=text, level=level)


def _para(text: str) -> Block:
    return Block("text", text=text)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> Block:
    return Block("table", table=Table(tuple(headers), tuple(tuple(r) for r in rows)))


def _table_or(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> Block:
    """A table of the rows, or the paragraph `empty` when there are none."""
    return _table(headers, rows) if rows else _para(empty)


def _summary(text: str | None) -> list[Block]:
    return [_para(md_text(text))] if text else []


def doc_tools(spec: Spec, header: str) -> DocContext:
    rows = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        rows.append(
            (
                md_code(tool.id),
                tool.kind,
                tool.risk,
                codes_text(tool.effects),
                _reversible(tool),
                _availability(tool),
                md_text(tool.summary),
                md_text(where(tool.origin)),
            )
        )
    blocks = [
        _para(
            "Every registered tool. Reversible: whether the tool declares its effect "
            "reversible. Available when: the tool's availability, checked before exposure "
            "and again at each call."
        ),
        _table(
            (
                "Tool",
                "Kind",
                "Risk",
                "Effects",
                "Reversible",
                "Available when",
                "Summary",
                "Source",
            ),
            rows,
        ),
    ]
    blocks.extend(_data_blocks(spec))
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        if not tool.operations:
            continue
        blocks.append(_heading(f"Operations of {md_code(tool.id, cell=False)}", 3))
        blocks.append(
            _table(
                ("Operation", "Risk", "Effects", "Summary"),
                [
                    (md_code(op.name), op.risk, codes_text(op.effects), md_text(op.summary))
                    for _, op in sorted(tool.operations.items())
                ],
            )
        )
    return _page(header, "Tools", blocks)


def _field_marks(fields: Iterable[Field], prefix: str = "") -> list[tuple[str, Field]]:
    """Output fields (nested ones by dotted name, through lists, maps and unions) that declare
    their own trust or labels."""
    out: list[tuple[str, Field]] = []
    for f in fields:
        if f.trust is not None or f.labels:
            out.append((prefix + f.name, f))
        out += _field_marks(f.type.records() or (), f"{prefix}{f.name}.")
    return out


def _output_fields(tool: Tool) -> tuple[Field, ...]:
    """The listed fields of a tool's result (of its records, for `output list<{ … }>`)."""
    return (tool.output.records() or ()) if tool.output is not None else ()


def _declares_data(tool: Tool) -> bool:
    return bool(tool.trust or tool.labels or tool.on_success or _field_marks(_output_fields(tool)))


def _data_blocks(spec: Spec) -> list[Block]:
    """Where each tool's results come from (trust), the data labels they carry and the facts a
    successful call changes; shown when the spec declares any of it."""
    if not spec.labels and not any(_declares_data(t) for t in spec.tools.values()):
        return []
    rows = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        marks = _field_marks(_output_fields(tool))
        trust = tool.trust or "untrusted (default)"
        trust_parts = [trust] + [f"{md_code(n)}: {f.trust}" for n, f in marks if f.trust]
        if tool.output is not None and tool.output.type.holds_unlisted() and marks:
            # a field's trust speaks for listed fields only (language.md §5.5)
            trust_parts.append(f"unlisted fields: {tool.trust or 'untrusted'}")
        label_parts = [codes_text(tool.labels)] if tool.labels else []
        label_parts += [f"{md_code(n)}: {codes_text(f.labels)}" for n, f in marks if f.labels]
        additions = [md_code(update_text(u)) for u in tool.on_success]
        rows.append(
            (
                md_code(tool.id),
                "; ".join(trust_parts),
                "; ".join(label_parts) or "none",
                "; ".join(additions) or "nothing",
            )
        )
    blocks = [
        _heading("Data sources"),
        _para(
            "Where each tool's results come from for provenance (`from trusted`, `from "
            "untrusted`; a field's own trust overrides its tool's), the data labels its "
            "results carry (`seen(L)`, `from label L`), and what a successful call adds to "
            "list facts or removes from them. A tool's results are untrusted unless it says "
            "`trust trusted`."
        ),
        _table(("Tool", "Trust", "Labels", "On success"), rows),
    ]
    declared = [
        (md_code(name), md_text(label.description)) for name, label in sorted(spec.labels.items())
    ]
    declared += [(md_code(name), "built in") for name in BUILTIN_LABELS if name not in spec.labels]
    blocks.append(_table(("Label", "Description"), declared))
    return blocks


def session_rows(policy: Policy) -> list[tuple[str, ...]]:
    """Per rule that reads session state, its provenance, quantified and history terms (as
    spec text, one per line): what the rule needs from the session before the call."""
    rows: list[tuple[str, ...]] = []
    for rule in policy.rules:
        if rule.condition is None:
            continue
        terms: list[str] = []
        for found in session_terms(rule.condition):
            text = spec_text(found.term)
            if not isinstance(found.term, Extract) and found.over is None and text not in terms:
                terms.append(text)
        if terms:
            rows.append((md_code(rule.label), "<br>".join(md_code(t) for t in terms)))
    return rows


def doc_surfaces(spec: Spec, header: str) -> DocContext:
    blocks: list[Block] = []
    for name in sorted(spec.surfaces):
        surface = spec.surfaces[name]
        tools = sorted(surface_tools(spec, surface))
        blocks.append(_heading(md_code(name, cell=False)))
        blocks.extend(_summary(surface.summary))
        rank = surface.rank
        items = [
            "expose: " + (codes_text(s.text or s.value for s in surface.expose) or "nothing"),
            "hide: " + (codes_text(s.text or s.value for s in surface.hide) or "nothing"),
            f"limit: {surface.limit} (more public, available tools than this are ranked)",
            f"rank: recall {rank.recall} top {rank.top}, rerank {rank.rerank}"
            + (f", prefer {codes_text(rank.prefer)}" if rank.prefer else ""),
            f"tools ({len(tools)}): " + (codes_text(tools) or "none"),
        ]
        blocks.append(Block("list", items=tuple(items)))
    if not blocks:
        blocks.append(_para("This spec declares no surface."))
    return _page(header, "Surfaces", blocks)


def _code(lines: Iterable[str]) -> Block:
    return Block("code", text="python", items=tuple(lines))


_COMPILED = (
    "Under each tool, its rules in text order (`Bit`: the bit a match sets in `m`), then the "
    "Python function the runtime compiles from `model.json` for that policy and tool when it "
    "loads the harness, exactly as it runs (`PolicyEngine(spec).decider(policy).source(tool)` "
    "returns it). The function normalizes the call's `path` arguments, picks the call's tool "
    "view, and tests each candidate rule's condition; the set of matches `m` then picks a "
    "cached decision. Spec text never enters this code: keys, literals and patterns are the "
    "`_k` names listed under each policy; `_eq`, `_within` and the other `_` helpers are the "
    "runtime's value semantics (`_hnum`, `_hold` and `_hsel` read the session's history); "
    "`_T`, `_M`, `_C`, `_V`, `_O` and `_F` are bound to the tool's id, decision builder, "
    "decision cache, tool view, operation views and path fixers."
)


def doc_policies(spec: Spec, header: str) -> DocContext:
    engine = PolicyEngine(spec)
    blocks: list[Block] = [
        _para(
            "Per policy, every tool × rule pair where the rule selects the tool, in the rules' "
            "text order. DENY beats ASK beats ALLOW; the first rule of the strongest effect "
            "wins; when no rule matches, the default applies."
        ),
        _para(_COMPILED),
    ]
    for name in sorted(spec.policies):
        policy = spec.policies[name]
        decider = engine.decider(name)
        blocks.append(_heading(md_code(name, cell=False)))
        blocks.extend(_summary(policy.summary))
        default = policy.default
        if default is None:
            text = "deny (no default: no rule allows this call)"
        elif default.table is not None:
            text = f"the risk table {md_code(default.table, cell=False)} (see approvals)"
        else:
            text = default.effect or "deny"
        blocks.append(_para(f"Default: {text}."))
        if policy.includes:
            blocks.append(_para("Includes: " + codes_text(policy.includes) + "."))
        constants = decider.constants
        if constants:
            blocks.append(_para("The names the compiled code reads its constants from:"))
            blocks.append(_code(f"{k} = {py_literal(v)}" for k, v in constants.items()))
        session = session_rows(policy)
        if session:
            blocks.append(
                _para(
                    "Rules that read the session (where a value came from, earlier calls, data "
                    "seen), and the terms they read:"
                )
            )
            blocks.append(_table(("Rule", "Session terms"), session))
        slots = _candidates(engine, policy)
        for tool_id in sorted(spec.tools):
            blocks.append(_heading(md_code(tool_id, cell=False), 3))
            rows = []
            slot = slots.get(tool_id, {})
            for pos, i in enumerate(sorted(slot)):
                rule = policy.rules[i]
                parts = []
                if slot[i] is not True:
                    parts.append(" or ".join(s.text for s in slot[i]))
                if rule.condition is not None:
                    parts.append(spec_text(rule.condition))
                rows.append(
                    (
                        str(1 << pos),
                        md_code(rule.label),
                        rule.effect.upper(),
                        md_code(" and ".join(parts)) if parts else "always",
                        md_text(rule.reason),
                        approvers_text(rule.approvers),
                        md_text(where(rule.origin)),
                    )
                )
            headers = ("Bit", "Rule", "Effect", "Condition", "Reason", "Approver", "Source")
            blocks.append(_table_or(headers, rows, "No rule of this policy selects this tool."))
            blocks.append(_code(decider.source(tool_id).rstrip("\n").split("\n")))
    return _page(header, "Policy matrix", blocks)


def doc_approvals(spec: Spec, header: str) -> DocContext:
    blocks: list[Block] = [
        _para(
            "An ASK waits for one of its approvers. A grant is bound to the call it approves: "
            "`once` to the exact invocation (tool id, tool_call_id and input hash), `task` to "
            "the task, `class` to the calls its selector and condition describe, each for its "
            "ttl. Approving one call never approves another. A request waits for an answer "
            "until its `expires` deadline (never, without one): an answer after it is refused."
        ),
        _heading("Rules that ask"),
    ]
    rows: list[tuple[str, ...]] = []
    for name in sorted(spec.policies):
        for rule in spec.policies[name].rules:
            if rule.effect != "ask":
                continue
            rows.append(
                (
                    md_code(name),
                    md_code(rule.label),
                    codes_text(s.text or s.value for s in rule.selectors),
                    md_code(spec_text(rule.condition)) if rule.condition is not None else "always",
                    approvers_text(rule.approvers),
                    grant_text(rule.grant),
                    expires_text(rule.expires_ms),
                    md_text(rule.reason),
                )
            )
    headers = ("Policy", "Rule", "Tools", "Condition", "Approver", "Grant", "Expires", "Reason")
    blocks.append(_table_or(headers, rows, "No rule asks for approval."))
    blocks.append(_heading("Risk tables"))
    rows = []
    for name in sorted(spec.risk_tables):
        table = spec.risk_tables[name]
        for risk in RISK_LEVELS:
            entry = table.entries.get(risk)  # type: ignore[call-overload]
            if entry is None:
                continue
            rows.append(
                (
                    md_code(name),
                    risk,
                    entry.effect.upper(),
                    approvers_text(entry.approvers),
                    grant_text(entry.grant),
                    expires_text(entry.expires_ms) if entry.effect == "ask" else "",
                    md_text(entry.reason),
                )
            )
    if rows:
        table_headers = ("Risk table", "Risk", "Effect", "Approver", "Grant", "Expires", "Reason")
        blocks.append(_table(table_headers, rows))
    else:
        blocks.append(_para("This spec declares no risk table."))
    return _page(header, "Approvals and grants", blocks)


def doc_mcp(spec: Spec, header: str) -> DocContext:
    blocks: list[Block] = [
        _para(
            "Only the tools declared here are projected. A projected tool is available while "
            "its server is connected and given to agents and the tool is discovered with the "
            "declared schema."
        )
    ]
    for name in sorted(spec.mcp_servers):
        server = spec.mcp_servers[name]
        blocks.append(_heading(md_code(name, cell=False)))
        blocks.extend(_summary(server.summary))
        items = [
            f"transport: {server.transport}",
            "command: " + (md_code(server.command, cell=False) if server.command else "none"),
            "tools: " + (", ".join(md_code(t, cell=False) for t in sorted(server.tools)) or "none"),
        ]
        blocks.append(Block("list", items=tuple(items)))
    if len(blocks) == 1:
        blocks.append(_para("This spec declares no MCP server."))
    return _page(header, "MCP servers", blocks)


def doc_skills(spec: Spec, header: str) -> DocContext:
    blocks: list[Block] = []
    for name in sorted(spec.skills):
        skill = spec.skills[name]
        blocks.append(_heading(md_code(name, cell=False)))
        blocks.extend(_summary(skill.summary))
        items = []
        if skill.use_when:
            items.append("use when: " + md_text(skill.use_when))
        items.append(
            "profile: " + (md_code(skill.profile, cell=False) if skill.profile else "none")
        )
        items.append(
            "private tools: "
            + (", ".join(md_code(t, cell=False) for t in sorted(skill.private_tools)) or "none")
        )
        for sub_name in sorted(skill.subagents):
            sub = skill.subagents[sub_name]
            tools = ", ".join(md_code(t, cell=False) for t in sorted(sub.tools)) or "no tools"
            items.append(f"subagent {md_code(sub_name, cell=False)}: {tools}")
        blocks.append(Block("list", items=tuple(items)))
    if not blocks:
        blocks.append(_para("This spec declares no skill."))
    return _page(header, "Skills", blocks)


def doc_agents(spec: Spec, header: str) -> DocContext:
    rows = []
    edges = []
    ids = {name: f"a{i}" for i, name in enumerate(sorted(spec.agents))}
    for name in sorted(spec.agents):
        agent = spec.agents[name]
        rows.append(
            (
                md_code(name),
                md_code(agent.surface) if agent.surface else "",
                md_code(agent.policy) if agent.policy else "",
                codes_text(sorted(agent.delegates)),
                codes_text(sorted(agent.skills)),
                md_text(agent.persona or agent.summary),
            )
        )
        for target in sorted(agent.delegates):
            if target in ids:
                edges.append(f"{ids[name]} -->|delegates| {ids[target]}")
    blocks: list[Block] = []
    if rows:
        blocks.append(
            _table(("Agent", "Surface", "Policy", "Delegates to", "Skills", "Persona"), rows)
        )
        nodes = [f'{ids[n]}["{mermaid_label(n)}"]' for n in sorted(spec.agents)]
        blocks.append(_heading("Delegation"))
        blocks.append(
            _para(
                "Delegation is one level deep: a delegated agent's surface never holds "
                "`delegate_task`."
            )
        )
        blocks.append(Block("mermaid", items=("flowchart LR", *nodes, *edges)))
    else:
        blocks.append(_para("This spec declares no agent."))
    return _page(header, "Agents and delegation", blocks)


def _step_label(step: Step) -> str:
    if step.kind == "call":
        what = f"call {step.tool}"
    elif step.kind == "delegate":
        what = f"delegate to {step.agent}"
    elif step.kind == "decide":
        what = f"decide: {step.question or ''}".rstrip()
        if step.options:
            what += f" ({', '.join(step.options)})"
    else:
        what = "gate" + (f" until {spec_text(step.condition)}" if step.condition else "")
    if step.compensation:
        what += " [compensation]"
    return f"{step.name}: {what}"


def _step_details(step: Step) -> str:
    """What a step's block adds to its action: who decides, the timeout and its default."""
    parts = []
    if step.by is not None:
        parts.append(f"by {approvers_text([step.by])}")
    if step.timeout_ms is not None:
        parts.append(f"timeout {duration_text(step.timeout_ms)}")
    if step.default is not None:
        parts.append(f"default {md_code(step.default)}")
    return "; ".join(parts)


def workflow_diagram(steps: Sequence[Step]) -> tuple[str, ...]:
    """A flowchart: an edge per dependency; the steps a `when` reads carry its condition on
    their edge, and a `when` that reads no step is written in its step's box."""
    ids = {step.name: f"s{i}" for i, step in enumerate(steps)}
    lines = ["flowchart TD"]
    for step in steps:
        label = _step_label(step)
        if step.when is not None and not steps_read(step.when) & set(step.depends_on):
            label += f" when {spec_text(step.when)}"
        lines.append(f'{ids[step.name]}["{mermaid_label(label)}"]')
    for step in steps:
        read = steps_read(step.when) if step.when is not None else set()
        for dep in sorted(step.depends_on):
            if dep in ids:
                when = f'|"{mermaid_label(spec_text(step.when))}"|' if dep in read else ""
                lines.append(f"{ids[dep]} -->{when} {ids[step.name]}")
        for action in step.on_failure:
            if action.kind == "compensate" and action.step in ids:
                lines.append(f'{ids[step.name]} -.->|"on failure"| {ids[action.step]}')
    return tuple(lines)


def _failure_text(step: Step) -> str:
    parts = []
    for action in step.on_failure:
        if action.kind == "retry":
            backoff = f" backoff {duration_text(action.backoff_ms)}" if action.backoff_ms else ""
            parts.append(f"retry {action.count}{backoff}")
        elif action.kind == "compensate":
            parts.append(f"compensate {md_code(action.step or '')}")
        else:
            who = approvers_text([action.approver]) if action.approver else ""
            parts.append(f"escalate {who}".rstrip())
    return " then ".join(parts)


def doc_workflows(spec: Spec, header: str) -> DocContext:
    blocks: list[Block] = []
    for name in sorted(spec.workflows):
        workflow = spec.workflows[name]
        blocks.append(_heading(md_code(name, cell=False)))
        blocks.extend(_summary(workflow.summary))
        items = []
        if workflow.agent:
            items.append(f"agent: {md_code(workflow.agent, cell=False)} (calls are judged as it)")
        if workflow.policy:
            items.append(f"policy: {md_code(workflow.policy, cell=False)}")
        if workflow.input is not None and workflow.input.fields:
            items.append("input: " + codes_text(f.name for f in workflow.input.fields))
        if items:
            blocks.append(Block("list", items=tuple(items)))
        blocks.append(Block("mermaid", items=workflow_diagram(workflow.steps)))
        rows = [
            (
                md_code(step.name),
                step.kind,
                md_text(_step_label(step).split(": ", 1)[1])
                + (f"; {_step_details(step)}" if _step_details(step) else ""),
                codes_text(step.depends_on),
                md_code(spec_text(step.when)) if step.when is not None else "",
                _failure_text(step),
                md_text(where(step.origin)),
            )
            for step in workflow.steps
        ]
        blocks.append(
            _table(("Step", "Kind", "Does", "After", "When", "On failure", "Source"), rows)
        )
    if not blocks:
        blocks.append(_para("This spec declares no workflow."))
    return _page(header, "Workflows", blocks)


def doc_suppressions(suppressions: Sequence[Suppression], header: str) -> DocContext:
    rows = [
        (md_text(f"{s.file}:{s.line}"), codes_text(s.codes), md_text(s.reason))
        for s in sorted(suppressions, key=lambda s: (s.file, s.line, s.codes))
    ]
    blocks: list[Block] = [
        _para(
            "Lint findings silenced in the spec with `# harnessc: ignore[…]`, each with its "
            "justification. Errors are never silenced."
        )
    ]
    if rows:
        blocks.append(_table(("Line", "Codes", "Reason"), rows))
    else:
        blocks.append(_para("No lint finding is silenced."))
    return _page(header, "Lint suppressions", blocks)


DOC_PAGES = (
    ("tools.md", "Tools: risk, effects, reversibility, availability"),
    ("surfaces.md", "Surfaces"),
    ("policies.md", "Policy matrix"),
    ("approvals.md", "Approvals and grants"),
    ("mcp.md", "MCP servers"),
    ("skills.md", "Skills"),
    ("agents.md", "Agents and delegation"),
    ("workflows.md", "Workflows"),
    ("suppressions.md", "Lint suppressions"),
)


def _counted(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def doc_index(spec: Spec, header: str, package: str, has_embeddings: bool) -> DocContext:
    counts = [
        _counted(len(spec.tools), "tool", "tools"),
        _counted(len(spec.surfaces), "surface", "surfaces"),
        _counted(len(spec.policies), "policy", "policies"),
        _counted(len(spec.agents), "agent", "agents"),
        _counted(len(spec.workflows), "workflow", "workflows"),
    ]
    blocks: list[Block] = []
    blocks.extend(_summary(spec.summary))
    if spec.version:
        blocks.append(_para(f"Version {md_text(spec.version)}; " + ", ".join(counts) + "."))
    else:
        blocks.append(_para(", ".join(counts).capitalize() + "."))
    blocks.append(
        Block("list", items=tuple(f"[{md_text(title)}]({path})" for path, title in DOC_PAGES))
    )
    blocks.append(_heading("Using the package"))
    blocks.append(
        _para(
            f'`from {package} import load; h = load(store="sqlite:///harness.db")` returns the '
            "runtime harness for this spec; every tool call goes through it."
        )
    )
    ranking = (
        "tool embeddings (`tool_embeddings.npy`) rank tools by meaning and words"
        if has_embeddings
        else "there are no tool embeddings, so exposure ranks tools lexically"
    )
    blocks.append(
        _para(
            "`model.json` is the compiled model: the runtime loads it and compiles each policy "
            "into Python then (the policy page shows that code, tool by tool); "
            f"`tool_docs.json` is the text the exposure index ranks; {ranking}. JSON and `.npy` "
            "files cannot carry a comment: this page and `__init__.py` name the spec they come "
            "from."
        )
    )
    return _page(header, f"Harness {md_code(spec.name, cell=False)}", blocks)


def doc_pages(
    spec: Spec,
    header: str,
    package: str,
    suppressions: Sequence[Suppression],
    has_embeddings: bool,
) -> dict[str, DocContext]:
    """Every page of the package's `docs/`, by file name."""
    return {
        "tools.md": doc_tools(spec, header),
        "surfaces.md": doc_surfaces(spec, header),
        "policies.md": doc_policies(spec, header),
        "approvals.md": doc_approvals(spec, header),
        "mcp.md": doc_mcp(spec, header),
        "skills.md": doc_skills(spec, header),
        "agents.md": doc_agents(spec, header),
        "workflows.md": doc_workflows(spec, header),
        "suppressions.md": doc_suppressions(suppressions, header),
        "README.md": doc_index(spec, header, package, has_embeddings),
    }
