"""Lowering surfaces, MCP servers, skills and agents."""

from __future__ import annotations

from harnessc.dsl import syntax as s
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted

from ..modules import head_span
from ..resolve import Module
from .core import origin
from .tools import ToolLowering

TRANSPORTS = ("stdio", "http", "sse", "websocket")
RECALL_MODES = ("embedding", "lexical")
RERANK_MODES = ("hybrid", "dense", "lexical")
PREFER_WORDS = ("packs",)


class AgentLowering(ToolLowering):
    """Surfaces, MCP servers, skills and agents."""

    # =========================================================================================
    # Surfaces

    def surface(self, module: Module, node: s.Surface) -> m.Surface:
        attrs = self.unique_attrs(node.items, ("limit", "summary"), "a surface")
        expose: list[m.Selector] = []
        hide: list[m.Selector] = []
        ranks = [i for i in node.items if isinstance(i, s.Rank)]
        for extra in ranks[1:]:
            self.once({"rank": ranks[0]}, "rank", extra, head_span(extra))
        for item in node.items:
            if isinstance(item, s.Expose):
                expose.extend(self.selector(p, module) for p in item.patterns)
            elif isinstance(item, s.Hide):
                hide.extend(self.selector(p, module) for p in item.patterns)
        limit = 20
        limit_node: s.Int | None = None
        if "limit" in attrs:
            limit_node = next((v for v in attrs["limit"].values if isinstance(v, s.Int)), None)
            if limit_node is not None:
                limit = self.at_least_one(limit_node, "a surface's `limit`")
        rank = trusted(m.Rank)(top=max(60, limit))
        if ranks:
            rank = self.rank(ranks[0], limit, limit_node)
        return trusted(m.Surface)(
            name=f"{self.names[module.key]}.{node.name.text}",
            summary=self.text(attrs.get("summary")),
            expose=tuple(expose),
            hide=tuple(hide),
            limit=limit,
            rank=rank,
            origin=origin(node.name.span),
        )

    def rank(self, node: s.Rank, limit: int, limit_node: s.Int | None) -> m.Rank:
        attrs = self.unique_attrs(node.items, ("recall", "rerank", "prefer"), "a `rank` block")
        recall = "embedding"
        top = max(60, limit)
        if "recall" in attrs:
            values = attrs["recall"].values
            for v in values:
                if isinstance(v, s.Name):
                    recall = self.word(v, RECALL_MODES, "recall mode") or recall
                elif isinstance(v, s.Int):
                    top = self.at_least_one(v, "`top`")
                    if top < limit:
                        self.report(
                            "H308",
                            f"recall `top {top}` is smaller than the surface's `limit {limit}`",
                            v.span,
                            "fewer candidates than the limit",
                            secondary=[(limit_node.span, "the limit")] if limit_node else [],
                            help=f"recall at least `top {limit}`, or lower the limit",
                        )
        rerank = "hybrid"
        for v in self.name_values(attrs.get("rerank")):
            rerank = self.word(v, RERANK_MODES, "rerank mode") or rerank
        prefer = tuple(
            w
            for w in (
                self.word(v, PREFER_WORDS, "preference")
                for v in self.name_values(attrs.get("prefer"))
            )
            if w is not None
        )
        return trusted(m.Rank)(recall=recall, top=top, rerank=rerank, prefer=prefer)  # type: ignore[arg-type]

    # =========================================================================================
    # MCP servers, skills, agents

    def mcp(self, module: Module, node: s.Mcp) -> m.McpServer:
        attrs = self.unique_attrs(node.items, ("transport", "summary"), "an MCP server")
        transport = "stdio"
        command = None
        if "transport" in attrs:
            for v in attrs["transport"].values:
                if isinstance(v, s.Name):
                    transport = self.word(v, TRANSPORTS, "transport") or transport
                elif isinstance(v, s.Str):
                    command = v.value
        else:
            self.missing(
                "`transport`",
                node,
                f"MCP server `{node.name.text}`",
                help='write `transport stdio "command"` or `transport http "https://…"`',
            )
        ids = []
        for child in node.items:
            if isinstance(child, s.Tool):
                tool_id = f"mcp:{node.name.text}:tool:{child.name.text}"
                ids.append(tool_id)
                self.add_tool(module, child, tool_id, node.name.text, None)
        return trusted(m.McpServer)(
            id=node.name.text,
            transport=transport,  # type: ignore[arg-type]
            command=command,
            summary=self.text(attrs.get("summary")),
            tools=tuple(ids),
            origin=origin(node.name.span),
        )

    def skill(self, module: Module, node: s.Skill) -> m.Skill:
        qualified = f"{self.names[module.key]}.{node.name.text}"
        attrs = self.unique_attrs(node.items, ("profile", "summary", "use_when"), "a skill")
        private: list[str] = []
        subagents: dict[str, m.Subagent] = {}
        for child in node.items:
            if isinstance(child, s.PrivateTool):
                tool_id = child.tool.name.text
                private.append(tool_id)
                self.add_tool(module, child.tool, tool_id, None, qualified)
            elif isinstance(child, s.Subagent):
                sub = self.unique_attrs(child.items, ("tools", "persona", "summary"), "a subagent")
                subagents[child.name.text] = trusted(m.Subagent)(
                    name=child.name.text,
                    tools=tuple(self.ref(n, module) for n in self.name_values(sub.get("tools"))),
                    persona=self.text(sub.get("persona")),
                    summary=self.text(sub.get("summary")),
                    origin=origin(child.name.span),
                )
        profile = self.name_values(attrs.get("profile"))
        return trusted(m.Skill)(
            name=qualified,
            summary=self.text(attrs.get("summary")),
            use_when=self.text(attrs.get("use_when")),
            profile=self.ref(profile[0], module) if profile else None,
            private_tools=tuple(private),
            subagents=subagents,
            origin=origin(node.name.span),
        )

    def agent(self, module: Module, node: s.Agent) -> m.Agent:
        attrs = self.unique_attrs(
            node.items,
            ("persona", "summary", "surface", "policy", "delegate", "skills"),
            "an agent",
        )

        def one(key: str) -> str | None:
            names = self.name_values(attrs.get(key))
            return self.ref(names[0], module) if names else None

        return trusted(m.Agent)(
            name=f"{self.names[module.key]}.{node.name.text}",
            persona=self.text(attrs.get("persona")),
            summary=self.text(attrs.get("summary")),
            surface=one("surface"),
            policy=one("policy"),
            delegates=tuple(self.ref(n, module) for n in self.name_values(attrs.get("delegate"))),
            skills=tuple(self.ref(n, module) for n in self.name_values(attrs.get("skills"))),
            origin=origin(node.name.span),
        )
