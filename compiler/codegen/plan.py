"""The build plan: every decision of `harnessc build` made in Python, as typed values.

`plan_build(spec, …)` returns the files of the generated package, each a template name with a
typed context (or verbatim bytes). Templates only loop and branch over what the plan hands
them; every name, order, escape and Python expression is fixed here:

- spec text reaches generated Python only through `repr()` (literals) or `py_comment` (one
  comment line, non-printable characters escaped); the package's policies are `model.json`,
  which the runtime compiles when it loads it, and the code it compiles is shown, not emitted
  (docs/policies.md, from `Decider.source`);
- spec text reaches Markdown only through `md_text`, `md_code` and `mermaid_label`;
- everything that comes from a dict or a set is sorted; rules and steps keep their text order,
  which is their meaning.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import json
import keyword
import math
import os
import pathlib
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.runtime.exposure import EMBEDDING_IDS_FILE, EMBEDDINGS_FILE, tool_docs
from harnessc.runtime.model import (
    RISK_LEVELS,
    And,
    Approver,
    Compare,
    Condition,
    EnumMember,
    FactCall,
    Grant,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    Policy,
    RecordValue,
    SourceRef,
    Spec,
    Step,
    Tool,
)
from harnessc.runtime.policy import PolicyEngine
from harnessc.runtime.sessions import PUBLIC_KINDS, surface_tools

from ..analysis.policy import PolicyAnalysis
from ..lints.suppress import Suppression
from ..resolve import Resolution
from .cases import plan_cases

__all__ = [
    "RESERVED_PACKAGE_NAMES",
    "BuildPlan",
    "GeneratedFile",
    "check_package_name",
    "generated_header",
    "md_code",
    "md_text",
    "mermaid_label",
    "plan_build",
    "py_comment",
    "py_literal",
]

RESERVED_PACKAGE_NAMES = frozenset({"tests", "harnessc"})
"""`tests` is the name of the generated test suite's folder (inside the package), and a
package of that name would shadow a project's own tests; `harnessc` would shadow the runtime
the package imports."""


# ---------------------------------------------------------------------------------------------
# The plan's types


@dataclass(frozen=True)
class GeneratedFile:
    """One output file: `path` relative to the output folder (POSIX), rendered from `template`
    with `context`, or written as `data` when there is no template."""

    path: str
    template: str | None = None
    context: Any = None
    data: bytes | None = None


@dataclass(frozen=True)
class BuildPlan:
    package: str
    """The package's name: the `harness` header's name."""
    spec_path: str
    """The root spec, relative to the build root."""
    header: str
    files: tuple[GeneratedFile, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class InitContext:
    header: str
    spec_name: str
    """repr() of the spec's name."""
    title: str
    """A comment-safe line naming the harness."""
    policy_version: str
    has_embeddings: bool


@dataclass(frozen=True)
class TestsContext:
    """A module of the generated test suite: its code is the template's; only the header
    comes from the spec (every case is data in `cases.json`)."""

    __test__ = False  # not a pytest class
    header: str


TEST_MODULES = (
    ("__init__.py", "tests_init.py.j2"),
    ("runner.py", "tests_runner.py.j2"),
    ("test_policies.py", "tests_policies.py.j2"),
    ("test_schemas.py", "tests_schemas.py.j2"),
    ("test_surfaces.py", "tests_surfaces.py.j2"),
    ("test_workflows.py", "tests_workflows.py.j2"),
)
"""The generated test suite, in `OUT/<package>/tests/`, with its data in `cases.json`."""


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
# Escaping: the only ways spec text reaches generated files


def _escape_unprintable(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def py_comment(text: str) -> str:
    """Text safe inside one Python comment line: no line break can end the comment.

    >>> py_comment("a\\nimport os")
    'a\\\\nimport os'
    """
    return _escape_unprintable(text)


def py_literal(value: Any) -> str:
    """A Python literal for a JSON-like value, via repr() (finite floats, str, int, bool,
    None, lists, tuples and dicts of those), the same text on every run: a set's members are
    sorted, and a regular expression is the `re.compile` call that made it (the constants of
    compiled policy code are such values).

    >>> py_literal(["a'\\"", 1.5, True, None])
    '[\\'a\\\\\\'"\\', 1.5, True, None]'
    """
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, frozenset | set):
        inner = ", ".join(sorted(py_literal(v) for v in value))
        return f"frozenset({{{inner}}})" if value else "frozenset()"
    if isinstance(value, re.Pattern):
        return f"re.compile({value.pattern!r})"
    if isinstance(value, tuple):
        inner = ", ".join(py_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{py_literal(str(k))}: {py_literal(v)}" for k, v in value.items())
        return "{" + items + "}"
    raise TypeError(f"no literal for {type(value).__name__}")


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#!])")


def md_text(text: str | None) -> str:
    """Text for a Markdown paragraph or table cell: markup characters escaped, line breaks as
    `<br>`, so nothing in it can start a heading, a table row, a link or HTML.

    >>> md_text("a | b\\n<script>")
    'a \\\\| b<br>\\\\<script\\\\>'
    """
    if not text:
        return ""
    lines = [_escape_unprintable(_MD_SPECIAL.sub(r"\\\1", line)) for line in text.splitlines()]
    return "<br>".join(lines)


def md_code(text: str, cell: bool = True) -> str:
    """Inline code (a fence longer than any backtick run inside); in a table cell `|` is
    escaped, as GitHub's tables require even inside code."""
    body = _escape_unprintable(text)
    if cell:
        body = body.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`") or not body.strip():
        body = f" {body} "
    return f"{fence}{body}{fence}"


def mermaid_label(text: str) -> str:
    """Text for a quoted Mermaid label: quotes, angle brackets, backticks and `#` as Mermaid
    entity codes, so a label can neither close its quotes nor the code fence."""
    out = _escape_unprintable(text).replace("#", "#35;")
    for char, code in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;")):
        out = out.replace(char, code)
    return out.replace("&", "#amp;")


def generated_header(spec_path: str) -> str:
    return f"generated by harnessc from {spec_path}; do not edit"


def _where(origin: SourceRef | None) -> str:
    return f"{origin.file}:{origin.line}" if origin is not None else ""


# ---------------------------------------------------------------------------------------------
# The package name


def check_package_name(
    spec: Spec, header_span: Span | None, path: str | None = None, out: pathlib.Path | None = None
) -> list[Diagnostic]:
    """H501 when the spec's name cannot be the generated package's name, H502 when the package
    would shadow a module of the standard library or an installed one (`header_span`: the
    header's name; None when the spec has no header and is named after its file `path`; `out`:
    the build's output folder, whose own earlier build of the package shadows nothing)."""
    name = spec.name
    code, problem = "H501", None
    if not name.isidentifier() or not name.isascii():
        problem = "is not a Python identifier"
    elif keyword.iskeyword(name):
        problem = "is a Python keyword"
    elif name in RESERVED_PACKAGE_NAMES:
        problem = "is reserved"
    else:
        code, problem = "H502", shadowed_module(name, out)
    if problem is None:
        return []
    result = (
        "which the generated package would shadow"
        if code == "H502"
        else "so it cannot name the generated package"
    )
    if header_span is None:
        return [
            Diagnostic.make(
                code,
                f"the spec's name `{name}` (its file name) {problem}, {result}",
                None,
                path=path,
                help="add a header `harness NAME { }` whose NAME is a plain lowercase word",
            )
        ]
    return [
        Diagnostic.make(
            code,
            f"the harness name `{name}` {problem}, {result}",
            header_span,
            "the generated package is named after this",
            help=f"rename the harness, for example `{name}_agent`"
            if code == "H502"
            else "rename the harness to a plain word such as `remediation` or `my_agent`",
        )
    ]


def shadowed_module(name: str, out: pathlib.Path | None = None) -> str | None:
    """What a top-level package `name` would hide from `import`: a standard-library module, or a
    module an installed distribution provides (not the package an earlier build wrote to `out`,
    when the project that holds it is installed); None when it hides nothing."""
    if name in sys.stdlib_module_names:
        return "is a module of Python's standard library"
    distributions = importlib.metadata.packages_distributions().get(name)
    if not distributions:
        return None
    found = importlib.util.find_spec(name)
    origin = found.origin if found is not None else None
    if out is not None and origin is not None:
        own = (out / name).resolve()
        if pathlib.Path(origin).resolve().is_relative_to(own):
            return None
    return f"is a module installed by `{sorted(distributions)[0]}`"


# ---------------------------------------------------------------------------------------------
# Conditions as spec text


def _duration_text(ms: int | float) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return f"{ms}ms"
    out = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            out.append(f"{ms // size}{unit}")
            ms %= size
    if ms:
        out.append(f"{ms}ms")
    return "".join(out)


def spec_text(node: object, top: bool = True) -> str:
    """A condition or value written back as spec text (for docs and comments)."""
    if isinstance(node, Literal):
        if node.type == "duration":
            return _duration_text(node.value)  # type: ignore[arg-type]
        if node.type == "bool":
            return "true" if node.value else "false"
        if node.type == "string":
            return json.dumps(node.value, ensure_ascii=False)
        return repr(node.value)
    if isinstance(node, EnumMember):
        return node.name
    if isinstance(node, Path):
        root = () if node.root in ("fact", "step") else (node.root,)
        return ".".join((*root, *node.parts))
    if isinstance(node, FactCall):
        return f"{node.func}({node.name})"
    if isinstance(node, ListValue):
        return "[" + ", ".join(spec_text(i) for i in node.items) + "]"
    if isinstance(node, RecordValue):
        return "{" + ", ".join(f"{k}: {spec_text(v)}" for k, v in node.fields.items()) + "}"
    if isinstance(node, Compare):
        return f"{spec_text(node.left)} {node.op} {spec_text(node.right)}"
    if isinstance(node, And | Or):
        word = " and " if isinstance(node, And) else " or "
        text = word.join(spec_text(i, top=False) for i in node.items)
        return text if top else f"({text})"
    if isinstance(node, Not):
        return f"not {spec_text(node.item, top=False)}"
    raise TypeError(f"not a condition: {node!r}")


def condition_words(node: Condition, top: bool = True) -> str:
    """An availability condition in words, as Markdown (pieces of spec text as code)."""
    if isinstance(node, FactCall):
        verb = "is connected" if node.func == "connected" else "is running"
        return f"{md_code(node.name)} {verb}"
    if isinstance(node, And | Or):
        word = " and " if isinstance(node, And) else " or "
        text = word.join(condition_words(i, top=False) for i in node.items)
        return text if top else f"({text})"
    if isinstance(node, Not):
        return f"not {condition_words(node.item, top=False)}"
    if isinstance(node, Path):
        return f"{md_code(spec_text(node))} is true"
    return md_code(spec_text(node))


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


def _approvers(approvers: Iterable[Approver]) -> str:
    return ", ".join(f"{a.kind} {md_code(a.value)}" for a in approvers)


def _grant(grant: Grant | None) -> str:
    if grant is None:
        return ""
    text = f"{grant.scope}, ttl {_duration_text(grant.ttl_ms)}"
    if grant.selector is not None:
        text += f", for {md_code(grant.selector.text or grant.selector.value)}"
    if grant.condition is not None:
        text += f" when {md_code(spec_text(grant.condition))}"
    return text


def _codes(values: Iterable[str]) -> str:
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
                _codes(tool.effects),
                _reversible(tool),
                _availability(tool),
                md_text(tool.summary),
                md_text(_where(tool.origin)),
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
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        if not tool.operations:
            continue
        blocks.append(_heading(f"Operations of {md_code(tool.id, cell=False)}", 3))
        blocks.append(
            _table(
                ("Operation", "Risk", "Effects", "Summary"),
                [
                    (md_code(op.name), op.risk, _codes(op.effects), md_text(op.summary))
                    for _, op in sorted(tool.operations.items())
                ],
            )
        )
    return _page(header, "Tools", blocks)


def doc_surfaces(spec: Spec, header: str) -> DocContext:
    blocks: list[Block] = []
    for name in sorted(spec.surfaces):
        surface = spec.surfaces[name]
        tools = sorted(surface_tools(spec, surface))
        blocks.append(_heading(md_code(name, cell=False)))
        blocks.extend(_summary(surface.summary))
        rank = surface.rank
        items = [
            "expose: " + (_codes(s.text or s.value for s in surface.expose) or "nothing"),
            "hide: " + (_codes(s.text or s.value for s in surface.hide) or "nothing"),
            f"limit: {surface.limit} (more public, available tools than this are ranked)",
            f"rank: recall {rank.recall} top {rank.top}, rerank {rank.rerank}"
            + (f", prefer {_codes(rank.prefer)}" if rank.prefer else ""),
            f"tools ({len(tools)}): " + (_codes(tools) or "none"),
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
    "runtime's value semantics; `_T`, `_M`, `_C`, `_V`, `_O` and `_F` are bound to the tool's "
    "id, decision builder, decision cache, tool view, operation views and path fixers."
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
            blocks.append(_para("Includes: " + _codes(policy.includes) + "."))
        constants = decider.constants
        if constants:
            blocks.append(_para("The names the compiled code reads its constants from:"))
            blocks.append(_code(f"{k} = {py_literal(v)}" for k, v in constants.items()))
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
                        _approvers(rule.approvers),
                        md_text(_where(rule.origin)),
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
            "ttl. Approving one call never approves another."
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
                    _codes(s.text or s.value for s in rule.selectors),
                    md_code(spec_text(rule.condition)) if rule.condition is not None else "always",
                    _approvers(rule.approvers),
                    _grant(rule.grant),
                    md_text(rule.reason),
                )
            )
    headers = ("Policy", "Rule", "Tools", "Condition", "Approver", "Grant", "Reason")
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
                    _approvers(entry.approvers),
                    _grant(entry.grant),
                    md_text(entry.reason),
                )
            )
    if rows:
        blocks.append(_table(("Risk table", "Risk", "Effect", "Approver", "Grant", "Reason"), rows))
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
                _codes(sorted(agent.delegates)),
                _codes(sorted(agent.skills)),
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


def workflow_diagram(steps: Sequence[Step]) -> tuple[str, ...]:
    ids = {step.name: f"s{i}" for i, step in enumerate(steps)}
    lines = ["flowchart TD"]
    for step in steps:
        lines.append(f'{ids[step.name]}["{mermaid_label(_step_label(step))}"]')
    for step in steps:
        when = f'|"{mermaid_label(spec_text(step.when))}"|' if step.when is not None else ""
        for dep in sorted(step.depends_on):
            if dep in ids:
                lines.append(f"{ids[dep]} -->{when} {ids[step.name]}")
        for action in step.on_failure:
            if action.kind == "compensate" and action.step in ids:
                lines.append(f'{ids[step.name]} -.->|"on failure"| {ids[action.step]}')
    return tuple(lines)


def _failure_text(step: Step) -> str:
    parts = []
    for action in step.on_failure:
        if action.kind == "retry":
            backoff = f" backoff {_duration_text(action.backoff_ms)}" if action.backoff_ms else ""
            parts.append(f"retry {action.count}{backoff}")
        elif action.kind == "compensate":
            parts.append(f"compensate {md_code(action.step or '')}")
        else:
            who = _approvers([action.approver]) if action.approver else ""
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
            items.append("input: " + _codes(f.name for f in workflow.input.fields))
        if items:
            blocks.append(Block("list", items=tuple(items)))
        blocks.append(Block("mermaid", items=workflow_diagram(workflow.steps)))
        rows = [
            (
                md_code(step.name),
                step.kind,
                md_text(_step_label(step).split(": ", 1)[1]),
                _codes(step.depends_on),
                md_code(spec_text(step.when)) if step.when is not None else "",
                _failure_text(step),
                md_text(_where(step.origin)),
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
        (md_text(f"{s.file}:{s.line}"), _codes(s.codes), md_text(s.reason))
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


def doc_index(spec: Spec, header: str, package: str, has_embeddings: bool) -> DocContext:
    counts = [
        f"{len(spec.tools)} tools",
        f"{len(spec.surfaces)} surfaces",
        f"{len(spec.policies)} policies",
        f"{len(spec.agents)} agents",
        f"{len(spec.workflows)} workflows",
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


# ---------------------------------------------------------------------------------------------
# The whole plan


def _tool_docs_json(spec: Spec, header: str) -> bytes:
    tools = [spec.tools[t] for t in sorted(spec.tools)]
    indexed = [t for t in tools if t.kind in PUBLIC_KINDS | {"private"}]
    rows = [asdict(d) for d in tool_docs(indexed)]
    text = json.dumps(
        {"generated": header, "tools": rows}, sort_keys=True, indent=1, ensure_ascii=False
    )
    return (text + "\n").encode("utf-8")


def _npy_bytes(matrix: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(matrix, dtype=np.float32), allow_pickle=False)
    return buffer.getvalue()


def _cases_json(spec: Spec, header: str, analysis: PolicyAnalysis | None) -> bytes:
    """The generated suite's cases, the header first (so a rebuild knows the file as its own)."""
    body = json.dumps(
        plan_cases(spec, analysis, analysis.findings if analysis is not None else ()),
        sort_keys=True,
        indent=1,
        ensure_ascii=False,
    )
    generated = json.dumps(header, ensure_ascii=False)
    return ("{\n " + f'"generated": {generated},\n' + body[2:] + "\n").encode("utf-8")


def plan_build(
    spec: Spec,
    spec_path: str,
    suppressions: Sequence[Suppression] = (),
    embeddings: tuple[np.ndarray, Sequence[str]] | None = None,
    notes: Sequence[str] = (),
    analysis: PolicyAnalysis | None = None,
) -> BuildPlan:
    """The files of the package for `spec` (already checked): `spec_path` is the root spec
    relative to the build root, `embeddings` the build-time tool embeddings if any, `analysis`
    the policy analysis whose witnesses the generated tests check."""
    header = generated_header(spec_path)
    package = spec.name
    base = f"{package}/"
    files = [
        GeneratedFile(
            base + "__init__.py",
            "init.py.j2",
            InitContext(
                header=header,
                spec_name=py_literal(spec.name),
                title=py_comment(
                    f"harness {spec.name}" + (f" {spec.version}" if spec.version else "")
                ),
                policy_version=py_literal(spec.content_hash()),
                has_embeddings=embeddings is not None,
            ),
        ),
        GeneratedFile(base + "model.json", data=(spec.to_json() + "\n").encode("utf-8")),
        GeneratedFile(base + "tool_docs.json", data=_tool_docs_json(spec, header)),
    ]
    if embeddings is not None:
        matrix, ids = embeddings
        files.append(GeneratedFile(base + EMBEDDINGS_FILE, data=_npy_bytes(matrix)))
        ids_text = json.dumps(list(ids), indent=0, ensure_ascii=False) + "\n"
        files.append(GeneratedFile(base + EMBEDDING_IDS_FILE, data=ids_text.encode("utf-8")))
    docs = base + "docs/"
    pages = {
        "tools.md": doc_tools(spec, header),
        "surfaces.md": doc_surfaces(spec, header),
        "policies.md": doc_policies(spec, header),
        "approvals.md": doc_approvals(spec, header),
        "mcp.md": doc_mcp(spec, header),
        "skills.md": doc_skills(spec, header),
        "agents.md": doc_agents(spec, header),
        "workflows.md": doc_workflows(spec, header),
        "suppressions.md": doc_suppressions(suppressions, header),
        "README.md": doc_index(spec, header, package, embeddings is not None),
    }
    for name in sorted(pages):
        files.append(GeneratedFile(docs + name, "doc.md.j2", pages[name]))
    tests = base + "tests/"
    for name, template in TEST_MODULES:
        files.append(GeneratedFile(tests + name, template, TestsContext(header)))
    files.append(GeneratedFile(tests + "cases.json", data=_cases_json(spec, header, analysis)))
    return BuildPlan(
        package=package,
        spec_path=spec_path,
        header=header,
        files=tuple(sorted(files, key=lambda f: f.path)),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# The build's inputs


def build_root(spec: str | os.PathLike[str]) -> pathlib.Path:
    """The folder generated files name the spec relative to: the nearest folder at or above
    the spec holding a `pyproject.toml` (the project), else the spec's own folder."""
    from ..config import find_pyproject

    found = find_pyproject(pathlib.Path(spec))
    return found.parent if found is not None else pathlib.Path(spec).resolve().parent


def relative_to_root(path: str | os.PathLike[str], root: pathlib.Path) -> str:
    """`path` relative to the build root, in POSIX form: never absolute, never the cwd's."""
    try:
        rel = os.path.relpath(pathlib.Path(path).resolve(), root)
    except ValueError:  # another drive: only the file name is stable
        rel = pathlib.Path(path).name
    return pathlib.PurePath(rel).as_posix()


def check_package_name_of(
    spec: Spec, resolution: Resolution, out: pathlib.Path | None = None
) -> list[Diagnostic]:
    """`check_package_name` for a resolved build: the diagnostic points at the root's header."""
    roots = [m for m in resolution.modules if m.is_root]
    header = next(
        (i for m in roots for i in m.syntax.items if isinstance(i, s.Header)),
        None,
    )
    path = roots[0].name if roots else None
    span = header.name.span if header is not None else None
    return check_package_name(spec, span, path, out)


def tool_embeddings(spec: Spec) -> tuple[np.ndarray, list[str]] | None:
    """The build-time embeddings of every tool the exposure index holds, or None without the
    embed extra (the package then ranks lexically)."""
    from ..embed import build_tool_embeddings

    tools = [spec.tools[t] for t in sorted(spec.tools)]
    indexed = [t for t in tools if t.kind in PUBLIC_KINDS | {"private"}]
    found = build_tool_embeddings(indexed)
    return None if found.matrix is None else (found.matrix, list(found.ids))
