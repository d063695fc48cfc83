"""A small MCP server written with the SDK's server API (`MCPServer`), for the live-client tests.

    python tests/mcp_servers/scanner.py [--http PORT] [--drift]

It serves `scan(target)`, `create-issue(title)` and `slow(seconds)` over stdio, or over
streamable HTTP on 127.0.0.1:PORT. `rotate` changes the tool list while a client is connected
(removes `create-issue`, adds `audit`) and says so (`notifications/tools/list_changed`, and the
tools-changed event of `subscriptions/listen`). With `--drift`, `scan` reports another input
schema than the spec declares (a `depth` argument it requires). `crash` ends the process.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations


def build(drift: bool) -> MCPServer:
    app: MCPServer = MCPServer("scanner", version="1.2.0", log_level="CRITICAL")

    if drift:

        @app.tool(annotations=ToolAnnotations(readOnlyHint=True))
        def scan(target: str, depth: int) -> dict[str, Any]:
            """Scan a repository for known vulnerabilities."""
            return {"report": f"{target} at depth {depth}: clean"}

    else:

        @app.tool(annotations=ToolAnnotations(readOnlyHint=True, title="Scan a repository"))
        def scan(target: str) -> dict[str, Any]:
            """Scan a repository for known vulnerabilities."""
            return {"report": f"no findings in {target}; contact owner@vendor.example"}

    @app.tool(
        name="create-issue",
        annotations=ToolAnnotations(destructiveHint=False, openWorldHint=True),
    )
    def create_issue(title: str) -> str:
        """File a finding as an issue."""
        return f"issue filed: {title}"

    @app.tool()
    def slow(seconds: float) -> str:
        """Sleep, then answer."""
        time.sleep(seconds)
        return "woke up"

    @app.tool()
    def broken(reason: str) -> str:
        """Fail with the reason given."""
        raise ToolError(reason)

    @app.tool()
    def crash() -> str:
        """Stop the server at once, as a crash would."""
        os._exit(3)

    def audit(repo: str, strict: bool = False) -> str:
        """Audit a repository's dependencies."""
        return f"audited {repo}"

    @app.tool()
    async def rotate(ctx: Context) -> str:
        """Change the tool list: `create-issue` goes, `audit` comes."""
        app.remove_tool("create-issue")
        app.add_tool(audit)
        await ctx.notify_tools_changed()  # subscriptions/listen (2026-07-28)
        await ctx.session.send_tool_list_changed()  # notifications/tools/list_changed
        return "rotated"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, metavar="PORT")
    parser.add_argument("--drift", action="store_true")
    args = parser.parse_args()
    app = build(args.drift)
    if args.http is None:
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
