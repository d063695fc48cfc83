"""A second small MCP server written with the SDK (`MCPServer`), for the gateway's tests.

    python tests/mcp_servers/tracker.py [--http PORT]

It serves `open_ticket(title, severity)`, `close_ticket(ticket)` and `drop_project(name)`
(which no spec of the tests declares: a gateway never lists it) over stdio, or over
streamable HTTP on 127.0.0.1:PORT. Each tool answers with what it was given, so a test sees
exactly which call reached the server; `--ledger FILE` appends each call's tool and
arguments to FILE as a JSON line.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mcp.server.mcpserver import MCPServer


def build(ledger: str | None) -> MCPServer:
    app: MCPServer = MCPServer("tracker", version="0.3.0", log_level="CRITICAL")

    def note(tool: str, args: dict[str, Any]) -> None:
        if ledger is not None:
            with open(ledger, "a", encoding="utf-8") as out:
                out.write(json.dumps({"tool": tool, "args": args}) + "\n")

    @app.tool()
    def open_ticket(title: str, severity: str) -> dict[str, Any]:
        """Open a ticket."""
        note("open_ticket", {"title": title, "severity": severity})
        return {"ticket": f"T-{len(title)}", "title": title, "severity": severity}

    @app.tool()
    def close_ticket(ticket: str) -> dict[str, Any]:
        """Close a ticket."""
        note("close_ticket", {"ticket": ticket})
        return {"ticket": ticket, "closed": True}

    @app.tool()
    def drop_project(name: str) -> str:
        """Delete a whole project (declared by no spec of the tests)."""
        note("drop_project", {"name": name})
        return f"dropped {name}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, metavar="PORT")
    parser.add_argument("--ledger", default=None, metavar="FILE")
    args = parser.parse_args()
    app = build(args.ledger)
    if args.http is None:
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
