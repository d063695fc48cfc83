"""The kinds of names a spec declares, by scope, and the words messages call them."""

from __future__ import annotations

BUILTIN_ROOTS = frozenset({"actor", "task", "env", "resource", "tool", "args", "call"})
"""The roots a condition's path may start with anywhere (`args.to`, `actor.role`)."""
GLOBAL_KINDS = ("tool", "mcp", "fact", "connection", "runtime", "label")
MODULE_KINDS = ("surface", "policy", "risk_table", "agent", "workflow", "skill", "test")
LOCAL_KINDS = ("step", "operation", "subagent", "rule", "var")

KIND_WORDS = {
    "tool": "tool",
    "mcp": "MCP server",
    "fact": "fact",
    "connection": "connection",
    "runtime": "runtime",
    "label": "label",
    "surface": "surface",
    "policy": "policy",
    "risk_table": "risk table",
    "agent": "agent",
    "workflow": "workflow",
    "skill": "skill",
    "test": "test",
    "step": "step",
    "operation": "operation",
    "subagent": "subagent",
    "rule": "rule label",
    "var": "variable",
}
